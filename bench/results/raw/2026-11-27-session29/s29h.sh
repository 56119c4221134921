#!/usr/bin/env bash
# Session 29 call 8: the rest of the CUDA suites that run dot kernels, at 4c0bc4a (codegen v14):
# autograd, plan cache, compiled steps, loops, training (poisoned, sync), and the sample's
# training run checked against the CPU.
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/o
scripts/gpu-check build > /tmp/o/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
KILN_CACHE_DIR=/tmp/kc-tests KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 KILN_COMPILE=sync timeout 330 build-gpu/tests/kiln_tests --gtest_brief=1 \
  --gtest_filter='Grad.*:*GradOps*:PlanCache*:Compile*:AdaptiveLoopFlush*:Lazy*:NN*:Optim*:Checkpoint*:ModelOps*:Ops/Matmul*:Ops/FusedVsEager*:MatmulMisc*:SmallMatmulTest*' > /tmp/o/tests.log 2>&1; echo "tests rc=$?"
tail -4 /tmp/o/tests.log; grep -E "^\[  FAILED" /tmp/o/tests.log | head
tar czf $OUT/s29h.tgz -C /tmp/o .
echo "total $(( $(date +%s) - t0 )) s"
