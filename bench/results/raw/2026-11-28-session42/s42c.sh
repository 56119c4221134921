#!/usr/bin/env bash
# Session 42 call 3: (1) call 2's segfault at exit of the sample on an empty cache
# (KILN_COMPILE_PROCESSES=0), again with the exit handler registered after every compile:
# runs under a preload that prints every thread's stack on a fault or a hang (SIGUSR2 at 30 s);
# (2) the sample's first training steps on an empty cache (issue 19), 3 fresh processes;
# (3) the CUDA suite at the new default elementwise grid.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
g++ -O1 -g -shared -fPIC -o /tmp/segv.so scripts/tmp/segv.cpp 2>/dev/null || echo "no preload"
hunt=$OUT/hunt.txt; : > $hunt
crashes=0; runs=0; t1=$(date +%s)
while (( $(date +%s) - t1 < 75 )); do
  for t in KILN_COMPILE_PROCESSES=0 KILN_COMPILE_PROCESSES=0 default; do
    dir=$(mktemp -d /tmp/kiln-cold-XXXXXX); env_t=(); [[ $t != default ]] && env_t=("$t")
    env "${env_t[@]}" KILN_CACHE_DIR="$dir" LD_PRELOAD=/tmp/segv.so timeout -s USR2 -k 5 30 \
      build-gpu/samples/kiln-rnn --device cuda --steps 50 --log-every 50 --val-every 50 \
      --checkpoint-every 1000000 --out /tmp/kiln-cold-sample > /tmp/s.out 2> /tmp/s.err
    rc=$?; runs=$((runs+1))
    if (( rc != 0 )) || grep -q "^--- " /tmp/s.err; then
      crashes=$((crashes+1))
      { echo "=== run $runs ($t) rc $rc, kernels $(find $dir -name '*.kce' | wc -l)"; tail -3 /tmp/s.out; cat /tmp/s.err; } >> $hunt
    fi
    rm -rf "$dir" /tmp/kiln-cold-sample
  done
done
echo "hunt: $crashes of $runs runs failed ($(( $(date +%s) - t1 )) s)"
python3 - $hunt > $OUT/hunt-resolved.txt <<'PY'
import re, subprocess, sys
for line in open(sys.argv[1]):
    m = re.match(r"(\S+)\((\S*)\+(0x[0-9a-f]+)\)\s*\[", line)
    if m and m.group(2) == "" and "libnvrtc" not in m.group(1):
        r = subprocess.run(["addr2line", "-C", "-f", "-e", m.group(1), m.group(3)], capture_output=True, text=True).stdout.split("\n")
        line = line.rstrip() + "  => " + r[0] + "\n"
    elif m and m.group(2):
        line = line.rstrip() + "  => " + subprocess.run(["c++filt", m.group(2)], capture_output=True, text=True).stdout.strip() + "\n"
    sys.stdout.write(line)
PY
rm -f $hunt; head -c 5000 $OUT/hunt-resolved.txt
# Issue 19: the sample's first steps on an empty cache (elapsed_s of loss.csv: from the
# trainer's start, after the device and the model are set up), 3 fresh processes.
for r in 1 2 3; do
  dir=$(mktemp -d /tmp/kiln-cold-XXXXXX)
  KILN_CACHE_DIR="$dir" build-gpu/samples/kiln-rnn --device cuda --steps 5 --log-every 1 --val-every 1000 \
    --checkpoint-every 1000000 --out /tmp/kiln-first > /dev/null 2>&1; echo "first steps run $r rc $?"
  cat /tmp/kiln-first/loss.csv; rm -rf "$dir" /tmp/kiln-first
done | tee $OUT/first-steps.txt
OUT=$OUT scripts/gpu-check suite > $OUT/suite.txt 2>&1; echo "suite rc $? $(( $(date +%s) - t0 )) s"
tail -8 $OUT/suite.txt
rm -f $OUT/b.txt $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
