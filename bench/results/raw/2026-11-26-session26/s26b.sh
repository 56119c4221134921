#!/usr/bin/env bash
# Session 26 call 2: where the sample's first step goes. Step 1/2/5 elapsed (s) per mode:
# cold (empty cache) background and sync; warm disk (a cache a full sync run filled) sync and
# standin (everything interpreted, nothing compiled); each 3 times, fresh processes.
set -uo pipefail
t0=$(date +%s)
scripts/gpu-check build > /tmp/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
b=build-gpu
steps() { awk -F, 'NR>1 && ($1==1||$1==2||$1==5||$1==20) {printf "%s=%.3f ", $1, $4}' $1/loss.csv; }
one() { # mode cachedir label [extra flags]
  local mode=$1 dir=$2 label=$3; shift 3
  rm -rf /tmp/fs-out
  KILN_COMPILE=$mode KILN_CACHE_DIR=$dir $b/samples/kiln-rnn --device cuda --steps 20 --log-every 1 \
    --val-every 100000 --checkpoint-every 1000000 --out /tmp/fs-out "$@" > /tmp/fs.log 2>&1 || { echo "failed $label"; tail -5 /tmp/fs.log; }
  echo "$label: $(steps /tmp/fs-out)"
}
warm=/tmp/kiln-warm; rm -rf $warm
one sync $warm "fill (sync, cold)"
one sync $warm "fill again (sync, warm)"
for r in 1 2 3; do
  d=$(mktemp -d); one background $d "r$r cold background"; rm -rf $d
  d=$(mktemp -d); one sync $d "r$r cold sync"; rm -rf $d
  one sync $warm "r$r warm sync"
  one standin $warm "r$r warm standin"
  one sync $warm "r$r warm sync no-compile" --no-compile
  d=$(mktemp -d); one background $d "r$r cold background no-compile" --no-compile; rm -rf $d
done
echo "total $(( $(date +%s) - t0 )) s"
