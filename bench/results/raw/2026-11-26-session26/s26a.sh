#!/usr/bin/env bash
# Session 26 call 1: build, the Standin GPU tests (poisoned), the sample's first steps.
set -uo pipefail
t0=$(date +%s)
scripts/gpu-check build > /tmp/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"; tail -3 /tmp/build.out
KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 build-gpu/tests/kiln_tests --gtest_filter='Standin*' --gtest_brief=1 > $OUT/standin.log 2>&1
echo "standin rc=$? $(( $(date +%s) - t0 )) s"; grep -E "FAILED|Failure|differ|PASSED|Expected|Which is" $OUT/standin.log | head -60
scripts/tmp/first_step.sh build-gpu 2>&1 | tee $OUT/first_step.log
echo "total $(( $(date +%s) - t0 )) s"
