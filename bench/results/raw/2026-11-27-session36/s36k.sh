#!/usr/bin/env bash
# Session 36, call 11: dot kernels with clusters (default) against none, LSTM and GRU cells at
# batch 1, hidden 128 / 256 / 512: warm (a loop without eval: GPU busy per step, CUPTI) and cold
# (the weights evicted from L2 before every step: the cell kernel's mean time).
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
g++ -O2 -shared -fPIC bench/cupti/kernel_trace.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcupti -o /tmp/libkt.so || exit 1
sweep() {
  local f="-std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench -Ibuild-gpu/generated/include -I.deps/llvm/include -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu"
  g++ tools/host-probe/loop_no_eval.cpp $f -o /tmp/probe || exit 1
  g++ scripts/tmp/dot_cold.cpp $f -o /tmp/dot_cold || exit 1
  export KILN_CACHE_DIR=/tmp/cache-$1 KILN_COMPILE=sync
  for c in lstm gru; do for h in 128 256 512; do
    CUDA_INJECTION64_PATH=/tmp/libkt.so KERNEL_TRACE_OUT=/tmp/tr.csv timeout 90 /tmp/probe ${c}1h$h 4000 N > /tmp/p.txt 2>&1
    warm=$(python3 bench/gpu_timeline.py /tmp/tr.csv --steps 3000 --per-step 1 --top 1 | sed -n 2p | grep -oE "GPU busy: [0-9.]+")
    CUDA_INJECTION64_PATH=/tmp/libkt.so KERNEL_TRACE_OUT=/tmp/tr.csv timeout 90 /tmp/dot_cold $c $h 300 > /tmp/q.txt 2>&1
    cold=$(python3 bench/gpu_timeline.py /tmp/tr.csv --steps 250 --per-step 2 --top 3 | grep matmul | awk -F'|' '{print $5}')
    echo "$1 $c h$h: warm $warm us/step; cold cell kernel $cold us"
  done; done
  unset KILN_CACHE_DIR KILN_COMPILE
}
sweep clusters | tee $OUT/sweep.txt
sed -i 's/  while (v.dot_cluster < 8 \&\& groups/  while (false \&\& v.dot_cluster < 8 \&\& groups/' codegen/layouts/dot.cpp
cmake --build build-gpu -j16 > /tmp/b2.log 2>&1 || tail -5 /tmp/b2.log
echo "rebuilt $(( $(date +%s) - t0 )) s"
sweep noclusters | tee -a $OUT/sweep.txt
echo "total $(( $(date +%s) - t0 )) s"
