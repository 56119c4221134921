#!/usr/bin/env bash
# Session 29 call 6: shared memory of the dot layout and the carveout. Variants (scratch
# switches, one build, separate kernel caches, alternated): A as committed; B the dot layout's
# partial-sum arrays sized 8 warps x bx instead of 256 (KILN_SCRATCH_SDSIZE=1: LSTM cell 8 KB ->
# 2 KB); C every kernel loaded with cudaFuncAttributePreferredSharedMemoryCarveout = 100
# (KILN_SCRATCH_CARVEOUT); D = B + the Params lines touched before the wait (KILN_SCRATCH_TOUCH=3).
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/o
scripts/gpu-check build > /tmp/o/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/probe || exit 1
g++ -O2 -shared -fPIC bench/cupti/kernel_trace.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcupti -o /tmp/libkt.so || exit 1
variant() { # name -> env assignments
  case $1 in
    A) echo "KILN_CACHE_DIR=/tmp/kc-A" ;;
    B) echo "KILN_CACHE_DIR=/tmp/kc-B KILN_SCRATCH_SDSIZE=1" ;;
    C) echo "KILN_CACHE_DIR=/tmp/kc-C KILN_SCRATCH_CARVEOUT=100" ;;
    D) echo "KILN_CACHE_DIR=/tmp/kc-D KILN_SCRATCH_SDSIZE=1 KILN_SCRATCH_TOUCH=3" ;;
  esac
}
for r in 1 2; do
  for c in lstm1 gru1 seed64 lstm32; do
    for v in A B C D; do
      env $(variant $v) KILN_COMPILE=sync CUDA_INJECTION64_PATH=/tmp/libkt.so KERNEL_TRACE_OUT=/tmp/tr.csv /tmp/probe $c 4000 E > /dev/null 2>&1
      echo "r$r $c $v traced E: $(python3 bench/gpu_timeline.py /tmp/tr.csv --steps 3000 --per-step 1 --top 1 2>/dev/null | sed -n 2p)"
    done
  done
  for c in "LSTM batch 1" "GRU batch 1" "seed d=64" "LSTM batch 32"; do
    for v in A B C D; do
      f=/tmp/o/r$r-$v-${c// /_}.md
      env $(variant $v) KILN_COMPILE=sync build-gpu/bench/rnn_gpu 2000 3 "$c" > "$f" 2>&1
      echo "r$r $v $c rc=$? $(grep -E "step compiled" "$f" | grep -E "\| [0-9.]+-[0-9.]+ \|" | cut -d'|' -f2,5,6 | tr '\n' ';')"
      grep -E "\| NO \|" "$f"
    done
  done
done
tar czf $OUT/s29f.tgz -C /tmp/o .
echo "total $(( $(date +%s) - t0 )) s"
