#!/usr/bin/env bash
set -uo pipefail
git log --oneline | head -1 > $OUT/commit.txt
scripts/gpu-check build > $OUT/build.txt 2>&1 || { cat $OUT/build.txt | tail; exit 1; }
export KILN_CACHE_DIR=/tmp/kc4
KILN_TEST_DEVICE=cuda build-gpu/tests/kiln_tests --gtest_filter='CopyStreamGpu.*:HostCopiesGpu.*:InteropGpu.*:PinnedGpu*:*Transfer*' --gtest_brief=1 2>&1 | tail -4
for i in 1 2; do
build-gpu/bench/transfer_gpu 1024 7 > $OUT/transfer_gpu$i.md 2>&1; echo "transfer rc $?"
python3 bench/torch/transfer_torch.py --mib 1024 --reps 7 > $OUT/transfer_torch$i.md 2>&1; echo "torch rc $?"
done
grep -E "kiln|cudaMemcpy" $OUT/transfer_gpu*.md
cat $OUT/transfer_torch1.md
