#!/usr/bin/env bash
# session 20, call 2: memcheck of copy tests, transfer figures, cold start
set -uo pipefail
git log --oneline | head -1 > $OUT/commit.txt
[[ -x build-gpu/tests/kiln_tests ]] || scripts/gpu-check build > $OUT/build.txt 2>&1
cmake --build build-gpu -j16 > $OUT/build2.log 2>&1 || tail -30 $OUT/build2.log
export KILN_CACHE_DIR=/tmp/kc2
KILN_TEST_DEVICE=cuda compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/tests/kiln_tests \
  --gtest_filter='CopyStreamGpu.*:HostCopiesGpu.*:InteropGpu.*' --gtest_brief=1 > $OUT/memcheck.log 2>&1
echo "memcheck rc $?"; tail -5 $OUT/memcheck.log
build-gpu/bench/transfer_gpu 1024 7 > $OUT/transfer_gpu.md 2>&1; echo "transfer rc $?"
python3 bench/torch/transfer_torch.py --mib 1024 --reps 7 > $OUT/transfer_torch.md 2>&1; echo "torch rc $?"
cat $OUT/transfer_gpu.md | head -60
timeout 300 bench/cuda/cold_start.sh build-gpu > $OUT/cold_start.md 2>&1; echo "cold rc $?"
cat $OUT/cold_start.md
