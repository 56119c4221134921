#!/usr/bin/env bash
# Session 37 call 3: correctness gates for the dot layout without clusters (00cbff2) and the
# plan key change: the differential fuzzer on CUDA against the CPU (16 processes), then
# compute-sanitizer memcheck over gpu-check's subset.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail -30 $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
export KILN_CACHE_DIR=/tmp/kiln-fuzz-cache; rm -rf $KILN_CACHE_DIR
logs=$(mktemp -d); pids=()
for i in $(seq 0 15); do
  build-gpu/tests/kiln_fuzz --seed $((37 + i * 1000000)) --programs 1000000 --seconds 170 --device cuda > $logs/$i.log 2>&1 &
  pids+=($!)
done
rc_all=0; for p in "${pids[@]}"; do wait $p || rc_all=1; done
cat $logs/*.log > $OUT/fuzz-cuda.log
grep -h -A3 MISMATCH $OUT/fuzz-cuda.log | head -20
echo "fuzz cuda: $(grep -ohP 'kiln_fuzz: \K[0-9]+(?= programs)' $OUT/fuzz-cuda.log | awk '{s+=$1} END {print s+0}') programs, rc $rc_all, $(( $(date +%s) - t0 )) s"
tail -2 $logs/0.log
left=$(( 570 - ($(date +%s) - t0) ))
KILN_COMPILE=sync timeout $left compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/tests/kiln_tests \
  --gtest_filter='GpuVsCpu.*:CopyStreamGpu.*:HostCopiesGpu.*:InteropGpu.*:Standin.*:-GpuVsCpu.OutOfMemory*:GpuVsCpu.LoopHolds*' > $OUT/memcheck.log 2>&1
echo "memcheck rc $? errors $(grep -oP 'ERROR SUMMARY: \K[0-9]+' $OUT/memcheck.log | tail -1); $(grep -E '^\[  (PASSED|FAILED) ' $OUT/memcheck.log | head -5)"
echo "total $(( $(date +%s) - t0 )) s"
