#!/usr/bin/env bash
# Session 30 call 8: where a merged step's time goes, for the next session's design. ncu's
# detailed sections (warp stall reasons, memory, speed of light) on one launch each of: the
# seed's 16-step merged kernel (cluster of 4), the LSTM cell's 8-step merged kernel (8 blocks),
# and the seed step launched alone (the unmerged variant), from the merged-launch tests.
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/o
scripts/gpu-check build > /tmp/o/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
export PATH=/usr/local/cuda/bin:$PATH
prof() { # name regex test
  timeout 90 ncu --set detailed --import-source no -k "regex:$2" --launch-count 1 \
    build-gpu/tests/kiln_tests --gtest_filter="$3" > /tmp/o/ncu-$1.txt 2>&1
  echo "ncu $1 rc=$? $(( $(date +%s) - t0 )) s"
  grep -E "Duration|Stall|Warp Cycles Per Issued|Issued Warp|L1/TEX Hit|L2 Hit|Memory Throughput|Compute \(SM\)|Achieved Occupancy|Registers Per|Block Limit|Eligible|One or More|No Eligible" /tmp/o/ncu-$1.txt | head -24
}
prof seed_x16 "_x16_" 'MergedLaunchGpu.Seed*'
prof lstm_x8 "_x8_" 'MergedLaunchGpu.Lstm*'
prof seed_alone "etc_f32_sm90" 'MergedLaunchGpu.Seed*'
tar czf $OUT/s30h.tgz -C /tmp/o .
echo "total $(( $(date +%s) - t0 )) s"
