#!/usr/bin/env bash
# Session 28 call 4: dot sums added by warp shuffles and remote sums loaded before any add
# (codegen v13), A/B against the same tree without that change (built alike): kernel time per
# step (CUPTI, eval every step) and loop time; CUDA tests on the new build (poisoned, sync).
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/o
scripts/gpu-check build > /tmp/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
(KILN_CACHE_DIR=/tmp/kc-tests KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 KILN_COMPILE=sync build-gpu/tests/kiln_tests --gtest_brief=1 \
  --gtest_filter='GpuVsCpu*:Codegen*:Standin*:Reproducible*:SmallMatmul*:Autograd*' > /tmp/o/tests-subset.log 2>&1; echo "tests rc=$?" >> /tmp/o/tests-subset.log) &
tests_pid=$!
rm -rf /tmp/old && mkdir /tmp/old && cp -r CMakeLists.txt cmake codegen engine include ir nn runtime samples scripts tests tools bench .deps /tmp/old/ 2>/dev/null
(cd /tmp/old && patch -R -p1 -s < scripts/tmp/dotshfl.diff && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_LLVM_ROOT=/tmp/old/.deps/llvm > /tmp/oldcfg.log 2>&1 && cmake --build build-gpu -j12 --target kiln > /tmp/oldb.log 2>&1) || { echo old build failed; tail -20 /tmp/oldb.log /tmp/oldcfg.log; }
echo "old built $(( $(date +%s) - t0 )) s"
for v in new old; do
  root=$PWD; [[ $v == old ]] && root=/tmp/old
  g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I$root -I$root/include -I$root/bench \
    -I$root/build-gpu/generated/include -I.deps/llvm/include $root/tools/host-probe/loop_no_eval.cpp \
    -L$root/build-gpu -lkiln -Wl,-rpath,$root/build-gpu -o /tmp/probe-$v || exit 1
done
g++ -O2 -shared -fPIC bench/cupti/kernel_trace.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcupti -o /tmp/libkt.so || exit 1
wait $tests_pid; tail -4 /tmp/o/tests-subset.log; echo "tests done $(( $(date +%s) - t0 )) s"
for r in 1 2; do
  for c in lstm1 gru1 lstm32; do
    for v in new old; do
      export KILN_CACHE_DIR=/tmp/kc-$v KILN_COMPILE=sync
      CUDA_INJECTION64_PATH=/tmp/libkt.so KERNEL_TRACE_OUT=/tmp/tr.csv /tmp/probe-$v $c 4000 E > /dev/null 2>&1
      echo "r$r $c $v traced E: $(python3 bench/gpu_timeline.py /tmp/tr.csv --steps 3000 --per-step 1 --top 1 2>/dev/null | sed -n 2p)"
      echo "r$r $c $v: $(/tmp/probe-$v $c 20000 ENEN 2>/dev/null | grep -o '^[a-z ]*[0-9.]* us/step' | tr '\n' ';')"
    done
  done
done
tar czf $OUT/s28d.tgz -C /tmp/o .
echo "total $(( $(date +%s) - t0 )) s"
