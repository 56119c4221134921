#!/usr/bin/env bash
# Session 29 call 2: dot rows loaded at once (CudaVariant::dot_rows; KILN_SCRATCH_DOTROWS=0 turns
# it off) x the scratch early trigger (KILN_SCRATCH_PDL=1), one build, separate kernel caches,
# alternated: rnn_gpu rows and CUPTI kernel time; then CUDA tests (poisoned, sync) on the default.
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/o
scripts/gpu-check build > /tmp/o/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/probe || exit 1
g++ -O2 -shared -fPIC bench/cupti/kernel_trace.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcupti -o /tmp/libkt.so || exit 1
for r in 1 2; do
  for c in "LSTM batch 1" "GRU batch 1"; do
    for v in 10 00 11 01; do
      rows=${v:0:1} pdl=${v:1:1}
      f=/tmp/o/r$r-rows$rows-pdl$pdl-${c// /_}.md
      KILN_SCRATCH_DOTROWS=$rows KILN_SCRATCH_PDL=$pdl KILN_CACHE_DIR=/tmp/kc-$v KILN_COMPILE=sync build-gpu/bench/rnn_gpu 2000 3 "$c" > "$f" 2>&1
      echo "r$r rows$rows pdl$pdl $c rc=$? $(( $(date +%s) - t0 )) s"
      grep -E "^\| .* \| (kiln GPU lazy, CUDA graphs|kiln GPU lazy, CUDA graphs, no eval in the loop|kiln GPU, the step compiled \(kiln::compile\)) \| [0-9]+ \| [0-9.]+ \| [0-9.]+-[0-9.]+ \|" "$f" | cut -d'|' -f2-6
      grep -E "\| NO \|" "$f"
    done
  done
  for c in lstm1 gru1; do
    for rows in 1 0; do
      export KILN_SCRATCH_DOTROWS=$rows KILN_CACHE_DIR=/tmp/kc-${rows}0 KILN_COMPILE=sync
      CUDA_INJECTION64_PATH=/tmp/libkt.so KERNEL_TRACE_OUT=/tmp/tr.csv /tmp/probe $c 4000 E > /dev/null 2>&1
      echo "r$r $c rows$rows traced E: $(python3 bench/gpu_timeline.py /tmp/tr.csv --steps 3000 --per-step 1 --top 1 2>/dev/null | sed -n 2p)"
    done
  done
  unset KILN_SCRATCH_DOTROWS
done
(KILN_CACHE_DIR=/tmp/kc-tests KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 KILN_COMPILE=sync timeout 280 build-gpu/tests/kiln_tests --gtest_brief=1 \
  --gtest_filter='Standin*:Codegen*:GpuVsCpu*:SmallMatmul*:Reproducible*' > /tmp/o/tests-subset.log 2>&1; echo "tests rc=$?" >> /tmp/o/tests-subset.log)
tail -4 /tmp/o/tests-subset.log; grep -E "^\[  FAILED" /tmp/o/tests-subset.log | head
tar czf $OUT/s29b.tgz -C /tmp/o .
echo "total $(( $(date +%s) - t0 )) s"
