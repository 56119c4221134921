#!/usr/bin/env bash
# Session 29 call 3: scratch KILN_SCRATCH_TOUCH=1: thread 0 loads one word per 64 bytes of the
# kernel's Params before griddepcontrol.wait (constant-cache lines arrive together, and under PDL
# while the previous kernel ends). A/B in one build, separate kernel caches, alternated:
# rnn_gpu rows and CUPTI kernel time (eval every step).
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/o
scripts/gpu-check build > /tmp/o/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/probe || exit 1
g++ -O2 -shared -fPIC bench/cupti/kernel_trace.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcupti -o /tmp/libkt.so || exit 1
for r in 1 2; do
  for c in "seed d=64" "LSTM batch 1" "GRU batch 1" "LSTM batch 32"; do
    for t in 1 0; do
      f=/tmp/o/r$r-touch$t-${c// /_}.md
      KILN_SCRATCH_TOUCH=$t KILN_CACHE_DIR=/tmp/kc-$t KILN_COMPILE=sync build-gpu/bench/rnn_gpu 2000 3 "$c" > "$f" 2>&1
      echo "r$r touch$t $c rc=$? $(( $(date +%s) - t0 )) s"
      grep -E "^\| .* \| (kiln GPU lazy, CUDA graphs|kiln GPU lazy, CUDA graphs, no eval in the loop|kiln GPU, the step compiled \(kiln::compile\)) \| [0-9]+ \| [0-9.]+ \| [0-9.]+-[0-9.]+ \|" "$f" | cut -d'|' -f2-6
      grep -E "\| NO \|" "$f"
    done
  done
  for c in lstm1 gru1 seed64; do
    for t in 1 0; do
      export KILN_SCRATCH_TOUCH=$t KILN_CACHE_DIR=/tmp/kc-$t KILN_COMPILE=sync
      CUDA_INJECTION64_PATH=/tmp/libkt.so KERNEL_TRACE_OUT=/tmp/tr.csv /tmp/probe $c 4000 E > /dev/null 2>&1
      echo "r$r $c touch$t traced E: $(python3 bench/gpu_timeline.py /tmp/tr.csv --steps 3000 --per-step 1 --top 1 2>/dev/null | sed -n 2p)"
    done
  done
  unset KILN_SCRATCH_TOUCH
done
tar czf $OUT/s29c.tgz -C /tmp/o .
echo "total $(( $(date +%s) - t0 )) s"
