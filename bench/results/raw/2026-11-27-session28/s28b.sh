#!/usr/bin/env bash
# Session 28 call 2: layer norm rows in registers for long tapes (final rule): CUDA tests
# (poisoned), fusion_gpu twice and PyTorch's fusion_torch in the same call; warm-cache ncu of
# the LSTM and GRU cell kernels at batch 1, stall samples per SASS instruction.
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/o
scripts/gpu-check build > /tmp/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
git log --oneline -1; git status --short | head
export KILN_CACHE_DIR=/tmp/kc28
KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 build-gpu/tests/kiln_tests --gtest_brief=1 \
  --gtest_filter='GpuVsCpu*:Codegen*:Standin*:Reproducible*' > /tmp/o/tests-subset.log 2>&1
echo "tests rc=$? $(tail -3 /tmp/o/tests-subset.log | tr '\n' ' ')"
for r in 1 2; do
  build-gpu/bench/fusion_gpu > /tmp/o/fusion_gpu-r$r.md 2>&1; grep -E "layer_norm|copy of" /tmp/o/fusion_gpu-r$r.md
done
python3 bench/torch/fusion_torch.py > /tmp/o/fusion_torch.md 2>&1; grep -E "layer_norm|copy" /tmp/o/fusion_torch.md
echo "fusion done $(( $(date +%s) - t0 )) s"
g++ -std=c++20 -O2 -g -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/loop_probe || exit 1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu)
for c in gru1 lstm1; do
  /tmp/loop_probe $c 3000 E > /dev/null 2>&1 # fill the cache
  timeout 150 $NCU --launch-skip 2500 --launch-count 1 -k regex:kiln_ \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats \
    --section Occupancy --sampling-interval 0 --import-source no \
    --cache-control none --clock-control none \
    -o /tmp/o/ncu-warm-$c /tmp/loop_probe $c 3000 E > /tmp/o/ncu-$c.log 2>&1; echo "ncu $c rc=$?"
  tail -3 /tmp/o/ncu-$c.log
  $NCU --import /tmp/o/ncu-warm-$c.ncu-rep --page details --print-details all 2>&1 | grep -v "^    ---\|^$" | cut -c1-150 | \
    grep -E "Duration|Elapsed Cycles|Registers|Block Size|Grid Size|Cluster Size|Achieved Occupancy|Compute \(SM\) Th|Warp Cycles Per Issued|One or More|kiln_" | sort -u | head -20
  $NCU --import /tmp/o/ncu-warm-$c.ncu-rep --page source --csv --print-source sass 2>/dev/null > /tmp/o/sass-warm-$c.csv
  python3 scripts/tmp/sass_top.py /tmp/o/sass-warm-$c.csv 40
done
tar czf $OUT/s28b.tgz -C /tmp/o .
cp /tmp/o/fusion_gpu-r1.md /tmp/o/fusion_torch.md $OUT/
echo "total $(( $(date +%s) - t0 )) s"
