#!/usr/bin/env bash
# Session 26 call 3: build; a host profile of the sample's first step (perf, cold background and
# warm disk); then the CUDA suite (gpu-check suite).
set -uo pipefail
t0=$(date +%s)
scripts/gpu-check build > /tmp/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
b=build-gpu
run1() { $b/samples/kiln-rnn --device cuda --steps 1 --log-every 1 --val-every 100000 --checkpoint-every 1000000 --out /tmp/fs-out; }
if command -v perf >/dev/null; then
  d=$(mktemp -d)
  KILN_CACHE_DIR=$d perf record -F 4999 --call-graph dwarf,32768 -o /tmp/p-cold.data -- $b/samples/kiln-rnn --device cuda --steps 1 --log-every 1 --val-every 100000 --checkpoint-every 1000000 --out /tmp/fs-out > /dev/null 2>&1
  echo "cold step: $(tail -1 /tmp/fs-out/loss.csv)"
  KILN_CACHE_DIR=$d run1 > /dev/null 2>&1
  KILN_CACHE_DIR=$d perf record -F 4999 --call-graph dwarf,32768 -o /tmp/p-warm.data -- $b/samples/kiln-rnn --device cuda --steps 1 --log-every 1 --val-every 100000 --checkpoint-every 1000000 --out /tmp/fs-out > /dev/null 2>&1
  echo "warm step: $(tail -1 /tmp/fs-out/loss.csv)"
  for w in cold warm; do
    perf report -i /tmp/p-$w.data --children --sort comm,symbol --stdio -g none --percent-limit 0.7 2>/dev/null | grep -v "^$" > $OUT/perf-$w-children.txt
    perf report -i /tmp/p-$w.data --no-children --sort comm,dso,symbol --stdio -g none --percent-limit 0.5 2>/dev/null | grep -v "^$" > $OUT/perf-$w-self.txt
  done
  head -70 $OUT/perf-cold-children.txt | cut -c1-160
else
  echo "no perf here"
fi
echo "profiles done $(( $(date +%s) - t0 )) s"
scripts/gpu-check suite > /tmp/suite.out 2>&1; echo "suite rc=$? $(( $(date +%s) - t0 )) s"
tail -12 /tmp/suite.out
grep -E "^\[  FAILED  \]" ${OUT:-/tmp/kiln-gpu-check}/tests-cuda.log | head -20
