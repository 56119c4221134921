#!/usr/bin/env bash
# Session 45 call 3 (prepared in session 44): session 44's GEMM probe again, each way also with
# KILN_GROUP_LAUNCHES=0 (its 8 products an evaluation may have run as one grouped launch, and
# its tile-size override did not take effect), so that one GEMM-tile kernel per product is timed
# against cuBLAS; then the tile sizes and clusters by the probe override.
set -uo pipefail
t0=$(date +%s)
git apply -p0 bench/results/raw/2026-11-28-session44/gemm_tile_probe.diff || exit 1
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
g++ -O2 -std=c++20 -I include -I build-gpu/generated/include -I bench -I . -I/usr/local/cuda/include \
  bench/results/raw/2026-11-28-session44/gemm_probe.cpp -o /tmp/gemm_probe -L build-gpu -lkiln \
  -Wl,-rpath,$PWD/build-gpu -L/usr/local/cuda/lib64 -lcublas -lcudart || exit 1
shapes=(1024,512,256,1 256,512,1024,1 300,256,1024,0 512,512,512,0 1024,1024,256,0 2048,128,512,0 128,2048,512,0)
own=(KILN_CUBLAS=0 KILN_COMPILE=sync)
{ for g in 1 0; do
    echo "## KILN_GROUP_LAUNCHES=$g, kiln's default (cuBLAS above 2^24)"; KILN_GROUP_LAUNCHES=$g KILN_COMPILE=sync /tmp/gemm_probe "${shapes[@]}"
    echo "## KILN_GROUP_LAUNCHES=$g, KILN_CUBLAS=0"; env "${own[@]}" KILN_GROUP_LAUNCHES=$g /tmp/gemm_probe "${shapes[@]}"
  done
  for v in 16,1 32,1 64,1 32,2; do
    echo "## KILN_GROUP_LAUNCHES=0, KILN_CUBLAS=0, T ${v%,*} C ${v#*,}"
    env "${own[@]}" KILN_GROUP_LAUNCHES=0 PROBE_GEMM_T=${v%,*} PROBE_GEMM_C=${v#*,} /tmp/gemm_probe "${shapes[@]}"
  done; } 2>&1 | grep -v "^|---\|^| case" | tee $OUT/variants.md
rm -f $OUT/b.txt $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
