#!/usr/bin/env bash
set -uo pipefail
scripts/gpu-check suite > /tmp/suite.out 2>&1; echo suite rc=$?
tail -8 /tmp/suite.out
grep -E "^\[  FAILED  \]" ${OUT:-/tmp/kiln-gpu-check}/tests-cuda.log | head; grep -E "Standin" ${OUT:-/tmp/kiln-gpu-check}/tests-cuda.log | head -3
KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 build-gpu/tests/kiln_tests --gtest_filter='Standin*' --gtest_brief=1 2>&1 | tail -3
export KILN_CACHE_DIR=/tmp/kiln-c9
pids=()
for i in 0 1 2 3 4 5 6 7 8 9; do
  build-gpu/tests/kiln_fuzz --seed $((9000001 + i * 1000000)) --programs 1000000 --seconds 60 --device cuda > /tmp/fz$i.log 2>&1 &
  pids+=($!)
done
rc=0; for p in "${pids[@]}"; do wait $p || rc=1; done
echo "fuzz rc=$rc programs $(grep -ohP 'kiln_fuzz: \K[0-9]+(?= programs)' /tmp/fz*.log | awk '{s+=$1} END {print s}')"
for i in 0 1 2 3 4 5 6 7 8 9; do
  if grep -q "signal\|MISMATCH" /tmp/fz$i.log; then echo "== fz$i"; grep -A40 "signal\|MISMATCH" /tmp/fz$i.log | head -60; fi
done
unset KILN_CACHE_DIR
scripts/tmp/first_step.sh build-gpu
