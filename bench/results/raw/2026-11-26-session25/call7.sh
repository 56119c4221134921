#!/usr/bin/env bash
set -uo pipefail
scripts/gpu-check build > /tmp/b.log 2>&1; echo build rc=$?
export KILN_CACHE_DIR=/tmp/kiln-c7
pids=()
for i in 0 1 2 3 4 5 6 7 8 9 10 11; do
  build-gpu/tests/kiln_fuzz --seed $((7000001 + i * 1000000)) --programs 1000000 --seconds 75 --device cuda > /tmp/fz$i.log 2>&1 &
  pids+=($!)
done
rc=0; for p in "${pids[@]}"; do wait $p || rc=1; done
echo "fuzz rc=$rc programs $(grep -ohP 'kiln_fuzz: \K[0-9]+(?= programs)' /tmp/fz*.log | awk '{s+=$1} END {print s}')"
for i in 0 1 2 3 4 5 6 7 8 9 10 11; do
  if grep -q "signal\|MISMATCH" /tmp/fz$i.log; then echo "== fz$i"; grep -A40 "signal\|MISMATCH" /tmp/fz$i.log | head -60; fi
done
