#!/usr/bin/env bash
# Session 44 call 4 (issue 19): kiln's GEMM-tile kernels for f32 GEMMs above 2^24 multiply-adds,
# by tile T and cluster C forced (probe-only PROBE_GEMM_T / PROBE_GEMM_C; the probe bounds
# PROBE_TILE_LOG2=28 PROBE_DOT_MAX_K=4096), against kiln's cuBLAS path and cuBLAS direct; then
# the sample's steady state again (call 3: own 0.971 and 1.954 ms a step, default 0.864-0.870).
set -uo pipefail
t0=$(date +%s)
cp scripts/tmp/small_matmul_probe.cpp engine/small_matmul.cpp
cp scripts/tmp/gemm_tile_probe.cpp codegen/layouts/gemm_tile.cpp
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
g++ -O2 -std=c++20 -I include -I build-gpu/generated/include -I bench -I . -I/usr/local/cuda/include \
  scripts/tmp/gemm_probe.cpp -o /tmp/gemm_probe -L build-gpu -lkiln -Wl,-rpath,$PWD/build-gpu \
  -L/usr/local/cuda/lib64 -lcublas -lcudart || exit 1
shapes=(1024,512,256,1 256,512,1024,1 300,256,1024,0 512,512,512,0 1024,1024,256,0 2048,128,512,0 128,2048,512,0 256,256,2048,1)
own=(PROBE_TILE_LOG2=28 PROBE_DOT_MAX_K=4096 KILN_COMPILE=sync)
{ echo "## kiln's cuBLAS path (today's rule)"; KILN_COMPILE=sync /tmp/gemm_probe "${shapes[@]}"
  echo "## own, the chooser's variant"; env "${own[@]}" /tmp/gemm_probe "${shapes[@]}"
  for v in 16,1 16,2 32,1 32,2 32,4 64,1 64,2 64,4; do
    echo "## own, T ${v%,*} C ${v#*,}"; env "${own[@]}" PROBE_GEMM_T=${v%,*} PROBE_GEMM_C=${v#*,} /tmp/gemm_probe "${shapes[@]}"
  done; } 2>&1 | grep -v "^|---\|^| case" | tee $OUT/variants.md
echo "t $(( $(date +%s) - t0 )) s"
RNN=(build-gpu/samples/kiln-rnn --device cuda --checkpoint-every 1000000 --val-every 100000)
for m in default own; do
  e=(X=1); [[ $m == own ]] && e=(PROBE_TILE_LOG2=28 PROBE_DOT_MAX_K=4096)
  d=/tmp/warm-$m; rm -rf $d; mkdir -p $d
  env "${e[@]}" KILN_CACHE_DIR=$d "${RNN[@]}" --steps 50 --out /tmp/r2 > /dev/null 2>&1
  for r in 1 2 3; do
    env "${e[@]}" KILN_CACHE_DIR=$d "${RNN[@]}" --steps 1000 --log-every 100 --out /tmp/r2 > /dev/null 2>&1
    awk -F, -v m=$m -v r=$r '$1==100{a=$4} $1==1000{b=$4} END{printf "steady %s run %d: %.3f ms a step (steps 100-1000)\n", m, r, (b-a)/900*1000}' /tmp/r2/loss.csv
  done
done 2>&1 | tee $OUT/steady.txt
rm -f $OUT/b.txt $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
