#!/usr/bin/env bash
# Session 28 call 13: a loop's flushes ask once whether the device runs synchronously (no stream
# query per flush), A/B against the same tree without that (built alike, same call): loops of
# the probe with an eval every step (E) and without (N), alternating builds, 3 rounds.
set -uo pipefail
t0=$(date +%s)
scripts/gpu-check build > /tmp/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
rm -rf /tmp/old && mkdir /tmp/old && cp -r CMakeLists.txt cmake codegen engine include ir nn runtime samples scripts tests tools bench .deps /tmp/old/ 2>/dev/null
(cd /tmp/old && patch -R -p1 -s < scripts/tmp/synccache.diff && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_LLVM_ROOT=/tmp/old/.deps/llvm > /tmp/oldcfg.log 2>&1 && cmake --build build-gpu -j16 --target kiln > /tmp/oldb.log 2>&1) || { echo old build failed; tail -20 /tmp/oldb.log; }
echo "old built $(( $(date +%s) - t0 )) s"
for v in new old; do
  root=$PWD; [[ $v == old ]] && root=/tmp/old
  g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I$root -I$root/include -I$root/bench \
    -I$root/build-gpu/generated/include -I.deps/llvm/include $root/tools/host-probe/loop_no_eval.cpp \
    -L$root/build-gpu -lkiln -Wl,-rpath,$root/build-gpu -o /tmp/probe-$v || exit 1
done
export KILN_CACHE_DIR=/tmp/kc KILN_COMPILE=sync
for c in seed64 lstm1 gru1; do /tmp/probe-new $c 2000 E > /dev/null 2>&1; done
for r in 1 2 3; do
  for c in seed64 lstm1 gru1; do
    for v in new old; do
      echo "r$r $c $v: $(/tmp/probe-$v $c 20000 ENEN 2>/dev/null | grep -o '^[a-z ]*[0-9.]* us/step' | tr -s ' ' | tr '\n' ';')"
    done
  done
done
echo "total $(( $(date +%s) - t0 )) s"
