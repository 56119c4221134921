#!/usr/bin/env bash
# Session 29 call 7: the dot layout's sums through codegen/device/dot_sum.cuh (shared with the
# stand-in interpreter) and its k_sd arrays sized 8 warps x bx (codegen v14). CUDA tests of the
# codegen, stand-in, GPU-vs-CPU, small-matmul and reproducible suites (poisoned, sync) on the new
# build; then kernel time per step (CUPTI, eval every step) and compiled steps, new vs the tree
# without the change (dotsum.diff reversed), alternated.
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/o
scripts/gpu-check build > /tmp/o/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
(KILN_CACHE_DIR=/tmp/kc-tests KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 KILN_COMPILE=sync timeout 300 build-gpu/tests/kiln_tests --gtest_brief=1 \
  --gtest_filter='Standin*:Codegen*:GpuVsCpu*:SmallMatmul*:Reproducible*' > /tmp/o/tests-subset.log 2>&1; echo "tests rc=$?" >> /tmp/o/tests-subset.log) &
tests_pid=$!
rm -rf /tmp/old && mkdir /tmp/old && cp -r CMakeLists.txt cmake codegen engine include ir nn runtime samples scripts tests tools bench .deps /tmp/old/ 2>/dev/null
(cd /tmp/old && patch -R -p1 -s < scripts/tmp/dotsum.diff && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_LLVM_ROOT=/tmp/old/.deps/llvm > /tmp/oldcfg.log 2>&1 && cmake --build build-gpu -j12 --target kiln rnn_gpu > /tmp/oldb.log 2>&1) || { echo old build failed; tail -20 /tmp/oldb.log /tmp/oldcfg.log; }
echo "old built $(( $(date +%s) - t0 )) s"
for v in new old; do
  root=$PWD; [[ $v == old ]] && root=/tmp/old
  g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I$root -I$root/include -I$root/bench \
    -I$root/build-gpu/generated/include -I.deps/llvm/include $root/tools/host-probe/loop_no_eval.cpp \
    -L$root/build-gpu -lkiln -Wl,-rpath,$root/build-gpu -o /tmp/probe-$v || exit 1
done
g++ -O2 -shared -fPIC bench/cupti/kernel_trace.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcupti -o /tmp/libkt.so || exit 1
wait $tests_pid; tail -4 /tmp/o/tests-subset.log; grep -E "^\[  FAILED" /tmp/o/tests-subset.log | head; echo "tests done $(( $(date +%s) - t0 )) s"
for r in 1 2; do
  for c in lstm1 gru1; do
    for v in new old; do
      export KILN_CACHE_DIR=/tmp/kc-$v KILN_COMPILE=sync
      CUDA_INJECTION64_PATH=/tmp/libkt.so KERNEL_TRACE_OUT=/tmp/tr.csv /tmp/probe-$v $c 4000 E > /dev/null 2>&1
      echo "r$r $c $v traced E: $(python3 bench/gpu_timeline.py /tmp/tr.csv --steps 3000 --per-step 1 --top 1 2>/dev/null | sed -n 2p)"
    done
  done
  for c in "LSTM batch 1" "GRU batch 1"; do
    for v in new old; do
      root=$PWD; [[ $v == old ]] && root=/tmp/old
      f=/tmp/o/r$r-$v-${c// /_}.md
      KILN_CACHE_DIR=/tmp/kc-$v KILN_COMPILE=sync $root/build-gpu/bench/rnn_gpu 2000 3 "$c" > "$f" 2>&1
      echo "r$r $v $c rc=$? $(grep -E "step compiled" "$f" | grep -E "\| [0-9.]+-[0-9.]+ \|" | cut -d'|' -f2,5,6 | tr '\n' ';')"
      grep -E "\| NO \|" "$f"
    done
  done
done
tar czf $OUT/s29g.tgz -C /tmp/o .
echo "total $(( $(date +%s) - t0 )) s"
