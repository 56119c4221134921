#!/usr/bin/env bash
# Session 26 call 4: build; Standin tests then PlanCache in one process (the order the suite
# runs them); the sample's first steps; then the sample patched to evaluate its parameters in
# its constructor (set-up timed apart), cold background / cold sync / warm sync.
set -uo pipefail
t0=$(date +%s)
scripts/gpu-check build > /tmp/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 KILN_COMPILE=sync build-gpu/tests/kiln_tests --gtest_filter='Standin*:PlanCache*:RecycledBlocks*' --gtest_brief=1 > $OUT/standin-plancache.log 2>&1
echo "tests rc=$? $(( $(date +%s) - t0 )) s"; grep -E "FAILED|Failure|differ|PASSED|Expected|Which is" $OUT/standin-plancache.log | head -40
scripts/tmp/first_step.sh build-gpu 2>&1 | tee $OUT/first_step.log
python3 scripts/tmp/setup_patch.py && cmake --build build-gpu --target kiln-rnn > /tmp/sb.log 2>&1 || { tail /tmp/sb.log; exit 1; }
b=build-gpu
one() { local mode=$1 dir=$2 label=$3; rm -rf /tmp/fs-out
  KILN_COMPILE=$mode KILN_CACHE_DIR=$dir $b/samples/kiln-rnn --device cuda --steps 20 --log-every 1 \
    --val-every 100000 --checkpoint-every 1000000 --out /tmp/fs-out > /tmp/fs.log 2>&1 || { echo "failed $label"; tail -5 /tmp/fs.log; }
  echo "$label: $(grep -o 'SETUP_MS [0-9.]*' /tmp/fs.log) steps $(awk -F, 'NR>1 && ($1==1||$1==2||$1==5||$1==20) {printf "%s=%.3f ", $1, $4}' /tmp/fs-out/loss.csv)"; }
warm=/tmp/kiln-warm2; rm -rf $warm; one sync $warm "fill"
for r in 1 2 3; do
  d=$(mktemp -d); one background $d "r$r cold background"; rm -rf $d
  d=$(mktemp -d); one sync $d "r$r cold sync"; rm -rf $d
  one sync $warm "r$r warm sync"
  one background $warm "r$r warm background"
done
echo "total $(( $(date +%s) - t0 )) s"
