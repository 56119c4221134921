#!/usr/bin/env bash
# Session 27 call 3: ncu of the loop kernels (LSTM b1, GRU b1, seed d=64; eval every step).
set -uo pipefail
t0=$(date +%s)
scripts/gpu-check build > /tmp/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
g++ -std=c++20 -O2 -g -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/loop_probe || exit 1
export KILN_CACHE_DIR=/tmp/kc27
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu)
for c in lstm1 gru1 seed64; do
  /tmp/loop_probe $c 3000 E > /dev/null 2>&1 # fill the cache
  timeout 200 $NCU --launch-skip 2500 --launch-count 1 -k regex:kiln_ --set full --import-source no \
    -o $OUT/ncu-$c /tmp/loop_probe $c 3000 E > /tmp/ncu-$c.log 2>&1; echo "ncu $c rc=$?"
  $NCU --import $OUT/ncu-$c.ncu-rep --page details --print-details all 2>&1 | grep -v "^    ---\|^$" | cut -c1-150 | \
    grep -E "Duration|Elapsed Cycles|Registers|Block Size|Grid Size|Cluster|Achieved Occupancy|Theoretical Occ|Memory Throughput|L2 Hit|Compute \(SM\)|Issue Slots|Stall|stall|Warp Cycles|One or More|No Eligible|Dynamic Shared|Static Shared|Waves|DRAM|kiln_" | head -60
  $NCU --import $OUT/ncu-$c.ncu-rep --page source --csv --print-source sass 2>/dev/null > $OUT/sass-$c.csv; echo "sass rows $(wc -l < $OUT/sass-$c.csv)"
done
echo "total $(( $(date +%s) - t0 )) s"
