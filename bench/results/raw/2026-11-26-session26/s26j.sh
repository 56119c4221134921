#!/usr/bin/env bash
# Session 26 call 10 (after call 9, same machine): exit checks x40 (SIGSEGV backtraces), the
# sample's first steps as users run it and patched (set-up apart), PyTorch's first training step,
# the seeds' loop cold start (cold_start.sh).
set -uo pipefail
t0=$(date +%s)
b=build-gpu
[[ -x $b/samples/kiln-rnn ]] || scripts/gpu-check build > /tmp/build.out 2>&1
g++ -O2 -shared -fPIC -o /tmp/libsegv.so scripts/tmp/prof/segv.cpp
ok=0; bad=0
for i in $(seq 40); do
  LD_PRELOAD=/tmp/libsegv.so $b/tests/kiln_exit_compiling_check > /tmp/ec.log 2>&1; rc=$?
  if [[ $rc -eq 0 ]]; then ok=$((ok+1)); else bad=$((bad+1)); echo "exit check rc=$rc"; grep -v "^[0-9a-f]*-[0-9a-f]* " /tmp/ec.log | head -30; fi
done
echo "exit checks: $ok rc 0, $bad other ($(( $(date +%s) - t0 )) s)"
scripts/tmp/first_step.sh $b 2>&1
steps() { awk -F, 'NR>1 && ($1==1||$1==2||$1==5||$1==20) {printf "%s=%.3f ", $1, $4}' $1/loss.csv; }
one() { local mode=$1 dir=$2 label=$3; rm -rf /tmp/fs-out
  KILN_COMPILE=$mode KILN_CACHE_DIR=$dir $b/samples/kiln-rnn --device cuda --steps 20 --log-every 1 \
    --val-every 100000 --checkpoint-every 1000000 --out /tmp/fs-out > /tmp/fs.log 2>&1 || { echo "failed $label"; tail -5 /tmp/fs.log; }
  echo "$label: $(grep -o 'SETUP_MS [0-9.]*' /tmp/fs.log) steps $(steps /tmp/fs-out)"; }
cp -r samples /tmp/samples_orig; python3 scripts/tmp/setup_patch.py && cmake --build $b --target kiln-rnn > /tmp/sb.log 2>&1 || { tail /tmp/sb.log; exit 1; }
warm=/tmp/kiln-warm5; rm -rf $warm; one sync $warm fill > /dev/null
for r in 1 2 3; do
  d=$(mktemp -d); one background $d "patched r$r cold background"; rm -rf $d
  d=$(mktemp -d); one sync $d "patched r$r cold sync"; rm -rf $d
  one sync $warm "patched r$r warm sync"
done
rm -rf samples && cp -r /tmp/samples_orig samples && cmake --build $b --target kiln-rnn > /tmp/sb.log 2>&1
echo "| PyTorch | device init ms | model+optimizer ms | first step ms | first 5 steps ms | 5th step ms |"
for r in 1 2 3; do for m in lstmcell cudnn; do python3 bench/torch/first_train_step_torch.py $m 2>&1 | tail -1; done; done
bench/cuda/cold_start.sh $b KILN_COMPILE=sync default 2>&1 | tail -30
echo "total $(( $(date +%s) - t0 )) s"
