#!/usr/bin/env bash
# Session 43 call 4: plan-key tokens (294cbe4). First an A/B in alternating processes on the same
# machine (KILN_KEY_TOKENS=1/0; loop probe, no eval, real device state), then issue 20's single
# run (gpu-check natural) at the new code.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > /dev/null 2>&1 || { echo build failed; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
llvm_inc=.deps/llvm/include; d=$(ls -d /usr/lib/llvm-*/include 2>/dev/null | sort -V | tail -1); [[ -n $d ]] && llvm_inc=$d
g++ -std=c++20 -O2 -g -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I$llvm_inc tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/probe || exit 1
for round in 1 2 3 4; do for c in gru1 lstm1 seed64; do for tok in 1 0; do
  KILN_KEY_TOKENS=$tok timeout 40 /tmp/probe $c 100000 EN > /tmp/p.txt 2>&1
  echo "round $round $c tokens=$tok: $(grep -E 'us/step' /tmp/p.txt | sed -E 's/ +/ /g' | cut -c1-60 | paste -sd'|')"
done; done; done | tee $OUT/tokens-ab.txt
echo "A/B $(( $(date +%s) - t0 )) s"
mkdir -p $OUT/natural
OUT=$OUT/natural timeout 420 scripts/gpu-check natural > $OUT/natural.txt 2>&1
echo "natural rc $? $(( $(date +%s) - t0 )) s"; grep -E "target|host speed" $OUT/natural.txt | tail -20
rm -f $OUT/natural/build.log $OUT/natural/configure.log
for f in $OUT/natural/*; do echo "=== $(basename $f)"; cat "$f"; done > $OUT/natural-all.md
rm -rf $OUT/natural
echo "total $(( $(date +%s) - t0 )) s"
