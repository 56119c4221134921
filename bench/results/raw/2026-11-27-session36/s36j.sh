#!/usr/bin/env bash
# Session 36, call 10: the LSTM and GRU cells at batch 1 in the dot layout without clusters (32
# blocks) against the default (clusters of 4, 128 blocks): GPU time per step (CUPTI) and wall
# (loop_forms). A hand-written 32-block LSTM step took 2.9-3.1 us in graphs (call 4) against
# kiln's 4.35 us.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
g++ -O2 -shared -fPIC bench/cupti/kernel_trace.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcupti -o /tmp/libkt.so || exit 1
probe() {
  g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
    -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
    -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/probe || exit 1
  g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
    -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_forms.cpp \
    -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/loop_forms || exit 1
  for c in lstm1 gru1; do for m in N E; do
    KILN_CACHE_DIR=/tmp/cache-$1 KILN_COMPILE=sync CUDA_INJECTION64_PATH=/tmp/libkt.so KERNEL_TRACE_OUT=/tmp/tr.csv timeout 90 /tmp/probe $c 4000 $m > /tmp/p.txt 2>&1
    echo "$1 $c $m: $(grep -E 'us/step' /tmp/p.txt | head -1 | cut -c1-60) | $(python3 bench/gpu_timeline.py /tmp/tr.csv --steps 3000 --per-step 1 --top 1 | sed -n 2p)"
  done; done
  KILN_CACHE_DIR=/tmp/cache-$1 KILN_COMPILE=sync timeout 120 /tmp/loop_forms 3000 lstm 2>&1 | grep -E "probe|eval every step|no eval  "
  KILN_CACHE_DIR=/tmp/cache-$1 KILN_COMPILE=sync timeout 120 /tmp/loop_forms 3000 gru 2>&1 | grep -E "eval every step|no eval  "
}
probe clusters | tee $OUT/clusters.txt
sed -i 's/  while (v.dot_cluster < 8 \&\& groups/  while (false \&\& v.dot_cluster < 8 \&\& groups/' codegen/layouts/dot.cpp
grep -c "while (false" codegen/layouts/dot.cpp
cmake --build build-gpu -j16 > /tmp/b2.log 2>&1 || tail -5 /tmp/b2.log
echo "rebuilt $(( $(date +%s) - t0 )) s"
probe noclusters | tee $OUT/noclusters.txt
echo "total $(( $(date +%s) - t0 )) s"
