#!/usr/bin/env bash
# Session 28 call 1: layer norm rows kept in registers vs shared memory (fusion_gpu twice, one
# build, a scratch switch); warm-cache ncu of the LSTM and GRU cell kernels at batch 1.
set -uo pipefail
t0=$(date +%s)
scripts/gpu-check build > /tmp/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
export KILN_CACHE_DIR=/tmp/kc28
for r in 1 2; do
  for ops in 8 16; do
    echo "== rep $r KILN_SCRATCH_ROW_OPS=$ops"
    KILN_SCRATCH_ROW_OPS=$ops build-gpu/bench/fusion_gpu > $OUT/fusion-ops$ops-r$r.md 2>&1
    grep -E "layer_norm|softmax rows" $OUT/fusion-ops$ops-r$r.md
  done
done
echo "fusion done $(( $(date +%s) - t0 )) s"
g++ -std=c++20 -O2 -g -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/loop_probe || exit 1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu)
for c in lstm1 gru1; do
  /tmp/loop_probe $c 3000 E > /dev/null 2>&1 # fill the cache
  timeout 200 $NCU --launch-skip 2500 --launch-count 1 -k regex:kiln_ --set full --import-source no \
    --cache-control none --clock-control none \
    -o $OUT/ncu-warm-$c /tmp/loop_probe $c 3000 E > /tmp/ncu-$c.log 2>&1; echo "ncu $c rc=$?"
  $NCU --import $OUT/ncu-warm-$c.ncu-rep --page details --print-details all 2>&1 | grep -v "^    ---\|^$" | cut -c1-150 | \
    grep -E "Duration|Elapsed Cycles|Registers|Block Size|Grid Size|Cluster|Achieved Occupancy|Memory Throughput|L2 Hit|L1/TEX Hit|Compute \(SM\)|Stall|stall|Warp Cycles|One or More|No Eligible|SM Frequency|kiln_" | head -40
  $NCU --import $OUT/ncu-warm-$c.ncu-rep --page source --csv --print-source sass 2>/dev/null > $OUT/sass-warm-$c.csv; echo "sass rows $(wc -l < $OUT/sass-warm-$c.csv)"
done
echo "total $(( $(date +%s) - t0 )) s"
