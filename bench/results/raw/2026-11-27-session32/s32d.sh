#!/usr/bin/env bash
# Session 32 call 4: why call 3's second empty-cache run with kiln's own GEMMs hung: 4 runs
# under a timeout, threads' backtraces on a hang; then the steady step time, own vs default.
set -uo pipefail
t0=$(date +%s)
scripts/gpu-check build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
command -v gdb >/dev/null || echo "no gdb"
for i in 1 2 3 4; do
  dir=$(mktemp -d /tmp/kiln-fs-XXXXXX); out=/tmp/o-own$i; rm -rf $out
  PROBE_TILE_LOG2=28 PROBE_DOT_MAX_K=4096 KILN_CACHE_DIR=$dir build-gpu/samples/kiln-rnn --device cuda --steps 30 --log-every 1 \
    --val-every 100000 --checkpoint-every 1000000 --out $out > $out.log 2>&1 &
  pid=$!
  for s in $(seq 1 40); do sleep 1; kill -0 $pid 2>/dev/null || break; done
  if kill -0 $pid 2>/dev/null; then
    echo "run $i: HUNG after 40 s; log:"; tail -5 $out.log; nvidia-smi --query-gpu=utilization.gpu --format=csv
    ps -eLo pid,tid,stat,pcpu,comm | awk -v p=$pid '$1==p'
    ps -ef | grep -c "serve-compiles"
    gdb -p $pid -batch -ex "thread apply all bt 12" 2>&1 | grep -E "^#|^Thread" | cut -c1-200 | head -120
    kill -9 $pid
  else
    wait $pid; echo "run $i: rc $? steps $(awk -F, 'NR>1 && ($1==1||$1==5||$1==30) {printf "%s=%s ", $1, $4}' $out/loss.csv)"
  fi
  rm -rf $dir
done 2>&1 | tee $OUT/hang.txt
echo "hang probe done $(( $(date +%s) - t0 )) s"
for mode in default own; do
  e=(X=1); [[ $mode == own ]] && e=(PROBE_TILE_LOG2=28 PROBE_DOT_MAX_K=4096)
  timeout 60 env "${e[@]}" KILN_CACHE_DIR=/tmp/warm-$mode build-gpu/samples/kiln-rnn --device cuda --steps 40 --log-every 20 --out /tmp/o-fill > /dev/null 2>&1 || echo "fill $mode failed/timeout"
done
for round in 1 2; do
  for mode in default own; do
    e=(X=1); [[ $mode == own ]] && e=(PROBE_TILE_LOG2=28 PROBE_DOT_MAX_K=4096)
    out=/tmp/o-ss; rm -rf $out
    timeout 60 env "${e[@]}" KILN_CACHE_DIR=/tmp/warm-$mode build-gpu/samples/kiln-rnn --device cuda --steps 1000 --log-every 100 \
      --val-every 100000 --checkpoint-every 1000000 --out $out > $out.log 2>&1 || echo "failed/timeout $mode"
    echo "round $round $mode warm: $(awk -F, 'NR>1 && ($1==1||$1==100||$1==1000) {printf "%s=%s,%s ", $1, $2, $4}' $out/loss.csv) ms/step(100-1000) $(awk -F, '$1==100{a=$4} $1==1000{b=$4} END{printf "%.3f", (b-a)/900*1000}' $out/loss.csv)"
  done
done 2>&1 | tee $OUT/steady.txt
echo "total $(( $(date +%s) - t0 )) s"
