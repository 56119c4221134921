#!/usr/bin/env bash
# Session 42 call 2: build at the new default grid; its bits test; hunt call 1's segfault of the
# sample on an empty cache (KILN_COMPILE_PROCESSES=0, round 2 of cold_start.sh) under a preload
# that prints the faulting thread's stack; then the CUDA suite.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
g++ -O1 -g -shared -fPIC -o /tmp/segv.so scripts/tmp/segv.cpp || echo "no preload"
KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 build-gpu/tests/kiln_tests \
  --gtest_filter='GpuVsCpu.ElementwiseGrids*:GpuVsCpu.ElementwiseChains*:GpuVsCpu.Broadcast*:GpuVsCpu.TiledTransposes' --gtest_brief=1 2>&1 | tail -3
hunt=$OUT/hunt.txt; : > $hunt
crashes=0; runs=0
while (( $(date +%s) - t0 < 200 )); do
  for t in KILN_COMPILE_PROCESSES=0 KILN_COMPILE_PROCESSES=0 default; do
    dir=$(mktemp -d /tmp/kiln-cold-XXXXXX); env_t=(); [[ $t != default ]] && env_t=("$t")
    env "${env_t[@]}" KILN_CACHE_DIR="$dir" LD_PRELOAD=/tmp/segv.so build-gpu/samples/kiln-rnn --device cuda --steps 50 \
      --log-every 50 --val-every 50 --checkpoint-every 1000000 --out /tmp/kiln-cold-sample > /tmp/s.out 2> /tmp/s.err
    rc=$?; runs=$((runs+1))
    if (( rc != 0 )); then
      crashes=$((crashes+1))
      { echo "=== run $runs ($t) rc $rc, kernels $(find $dir -name '*.kce' | wc -l)"; tail -5 /tmp/s.out; cat /tmp/s.err; } >> $hunt
    fi
    rm -rf "$dir" /tmp/kiln-cold-sample
  done
done
echo "hunt: $crashes of $runs runs failed ($(( $(date +%s) - t0 )) s)"
# resolve library+offset frames to symbols
python3 - $hunt > $OUT/hunt-resolved.txt <<'PY'
import re, subprocess, sys
for line in open(sys.argv[1]):
    m = re.match(r"(\S+)\((\S*)\+(0x[0-9a-f]+)\)\s*\[", line)
    if m and m.group(2) == "":
        lib, off = m.group(1), m.group(3)
        try:
            r = subprocess.run(["addr2line", "-C", "-f", "-i", "-e", lib, off], capture_output=True, text=True).stdout.split("\n")
            line = line.rstrip() + "  => " + " | ".join(x for x in r if x) + "\n"
        except Exception as e:
            pass
    elif m:
        line = line.rstrip() + "  => " + subprocess.run(["c++filt", m.group(2)], capture_output=True, text=True).stdout.strip() + "\n"
    sys.stdout.write(line)
PY
head -c 6000 $OUT/hunt-resolved.txt
rm -f $OUT/hunt.txt
OUT=$OUT scripts/gpu-check suite > $OUT/suite.txt 2>&1; echo "suite rc $? $(( $(date +%s) - t0 )) s"
tail -12 $OUT/suite.txt
rm -f $OUT/b.txt $OUT/build.log $OUT/configure.log
ls $OUT
echo "total $(( $(date +%s) - t0 )) s"
