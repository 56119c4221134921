#!/usr/bin/env bash
# Session 26 call 11: build; the differential fuzzer on CUDA with KILN_COMPILE=standin (every
# kernel the interpreter covers runs on it, reductions and segmented kernels included; nothing it
# covers is compiled), 12 processes x 90 s, against the CPU backend and lazy vs eager.
set -uo pipefail
t0=$(date +%s)
scripts/gpu-check build > /tmp/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
export KILN_CACHE_DIR=/tmp/kiln-c11 KILN_COMPILE=standin
pids=()
for i in $(seq 0 11); do
  build-gpu/tests/kiln_fuzz --seed $((26000001 + i * 1000000)) --programs 1000000 --seconds 90 --device cuda > /tmp/fz$i.log 2>&1 &
  pids+=($!)
done
rc=0; for p in "${pids[@]}"; do wait $p || rc=1; done
echo "fuzz (standin) rc=$rc programs $(grep -ohP 'kiln_fuzz: \K[0-9]+(?= programs)' /tmp/fz*.log | awk '{s+=$1} END {print s}')"
for i in $(seq 0 11); do
  if ! grep -q "0 mismatches" /tmp/fz$i.log; then echo "== fz$i"; tail -60 /tmp/fz$i.log; fi
done
grep -h "kiln_fuzz:" /tmp/fz*.log | head -3
echo "total $(( $(date +%s) - t0 )) s"
