#!/usr/bin/env bash
# Session 46 call (prepared in session 45): kiln's GEMM tiles against cuBLAS, done right this
# time: each tile/cluster variant on a fresh KILN_CACHE_DIR (the variant follows from the
# kernel's key, so a shared cache served every variant the first one's binary), ungrouped, without
# cuBLAS; then ncu over one product of 1024 x 512 x 256 (A^T), kiln's tile kernel and cuBLAS's.
set -uo pipefail
t0=$(date +%s)
git apply -p0 bench/results/raw/2026-11-28-session44/gemm_tile_probe.diff || exit 1
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
g++ -O2 -std=c++20 -I include -I build-gpu/generated/include -I bench -I . -I/usr/local/cuda/include \
  bench/results/raw/2026-11-28-session44/gemm_probe.cpp -o /tmp/gemm_probe -L build-gpu -lkiln \
  -Wl,-rpath,$PWD/build-gpu -L/usr/local/cuda/lib64 -lcublas -lcudart || exit 1
shapes=(1024,512,256,1 512,512,512,0 1024,1024,256,0 2048,128,512,0 128,2048,512,0)
{ for v in default 16,1 32,1 64,1 32,2 64,2; do
    d=$(mktemp -d /tmp/kc-XXXXXX); envs=(KILN_CACHE_DIR=$d KILN_CUBLAS=0 KILN_COMPILE=sync KILN_GROUP_LAUNCHES=0)
    [[ $v != default ]] && envs+=(PROBE_GEMM_T=${v%,*} PROBE_GEMM_C=${v#*,})
    echo "## $v"; env "${envs[@]}" /tmp/gemm_probe "${shapes[@]}"; rm -rf $d
  done; } 2>&1 | grep -v "^|---\|^| case" | tee $OUT/variants.md
d=$(mktemp -d /tmp/kc-XXXXXX)
KILN_CACHE_DIR=$d KILN_CUBLAS=0 KILN_COMPILE=sync KILN_GROUP_LAUNCHES=0 /tmp/gemm_probe 1024,512,256,1 > /dev/null
KILN_CACHE_DIR=$d KILN_CUBLAS=0 KILN_COMPILE=sync KILN_GROUP_LAUNCHES=0 timeout 200 \
  /usr/local/cuda/bin/ncu --launch-skip 40 --launch-count 6 --set detailed -o $OUT/gemm-1024x512x256 \
  /tmp/gemm_probe 1024,512,256,1 > $OUT/ncu.txt 2>&1; echo "ncu rc $?"
/usr/local/cuda/bin/ncu -i $OUT/gemm-1024x512x256.ncu-rep --page details --csv > $OUT/ncu-details.csv 2>/dev/null
grep -E '"(Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per Thread|Block Size|Grid Size)"' $OUT/ncu-details.csv | cut -d, -f5,12-16 | head -60
rm -rf $d $OUT/b.txt $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
