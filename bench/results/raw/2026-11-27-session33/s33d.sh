#!/usr/bin/env bash
# Session 33, call 4: is the host's slow phase the launch thread's spin sharing a core with
# the recording thread? CPU topology, then loop_forms with the launch thread on and off
# (KILN_LAUNCH_THREAD=0), alternated by process. Reuses call 3's build (warm machine).
set -uo pipefail
lscpu | grep -E "^CPU\(s\)|Thread|Core|Socket|Model name|NUMA" ; lscpu -e | head -20
nproc; cat /sys/fs/cgroup/cpu.max 2>/dev/null
[[ -x /tmp/loop_forms ]] || { echo "no build"; exit 1; }
for p in 1 2; do
  for lt in 1 0; do echo "== process $p, KILN_LAUNCH_THREAD=$lt"; KILN_LAUNCH_THREAD=$lt timeout 90 /tmp/loop_forms 2000; done
done 2>&1 | tee $OUT/lt.txt
