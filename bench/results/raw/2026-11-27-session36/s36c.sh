#!/usr/bin/env bash
# Session 36, call 3: merged launches against a kernel a step, alternated in each process
# (loop_forms' "no eval, merged" form), seed / LSTM / GRU at batch 1, four processes with the host
# probe; then the sample's steady state (kiln-rnn, traced training steps) with merging off/on.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_forms.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/loop_forms || exit 1
echo "built $(( $(date +%s) - t0 )) s"
export KILN_COMPILE=sync
timeout 60 /tmp/loop_forms 300 seed > /dev/null 2>&1
for p in 1 2 3 4; do
  echo "== process $p"
  timeout 120 /tmp/loop_forms 3000 2>&1 | grep -E "probe|eval every step|no eval  |merged"
done | tee $OUT/forms.txt
unset KILN_COMPILE
for r in 1 2; do for m in 0 1; do
  rm -rf /tmp/rnn-out
  KILN_MERGE_LAUNCHES=$m PROBE=1 timeout 120 build-gpu/samples/kiln-rnn --steps 1500 --log-every 500 --val-every 1500 --checkpoint-every 100000 --out /tmp/rnn-out > /tmp/rnn.txt 2>&1
  echo "round $r merge $m: $(tr '\r' '\n' < /tmp/rnn.txt | grep -E 'step 1500/' | tail -1)"
done; done | tee $OUT/sample.txt
echo "total $(( $(date +%s) - t0 )) s"
