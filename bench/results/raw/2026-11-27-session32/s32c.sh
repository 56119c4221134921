#!/usr/bin/env bash
# Session 32 call 3: the sample's GEMMs on kiln's own kernels instead of cuBLAS (bounds raised
# by the probe's env: tiled matmuls up to 2^28 multiply-adds, dots up to K = 4096), against the
# default: first steps on an empty cache, and the steady step time on a warm cache.
set -uo pipefail
t0=$(date +%s)
scripts/gpu-check build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
R="PROBE_TILE_LOG2=28 PROBE_DOT_MAX_K=4096"
run() { # label env... -- args
  local label=$1; shift; local envs=(); while [[ $1 != -- ]]; do envs+=("$1"); shift; done; shift
  local out=/tmp/o-$label; rm -rf $out
  env "${envs[@]}" build-gpu/samples/kiln-rnn --device cuda --val-every 100000 --checkpoint-every 1000000 --out $out "$@" > $out.log 2>&1 || { echo "failed $label"; tail -5 $out.log; }
}
for round in 1 2 3; do
  for mode in default own; do
    e=(X=1); [[ $mode == own ]] && e=($R)
    dir=$(mktemp -d /tmp/kiln-fs-XXXXXX)
    run fs-$mode "${e[@]}" KILN_CACHE_DIR=$dir -- --steps 30 --log-every 1
    echo "round $round $mode empty cache: elapsed_s at step $(awk -F, 'NR>1 && ($1==1||$1==2||$1==5||$1==30) {printf "%s=%s ", $1, $4}' /tmp/o-fs-$mode/loss.csv)"
    rm -rf $dir
  done
done 2>&1 | tee $OUT/first-step.txt
echo "first steps done $(( $(date +%s) - t0 )) s"
for mode in default own; do e=(X=1); [[ $mode == own ]] && e=($R); run fill-$mode "${e[@]}" KILN_CACHE_DIR=/tmp/warm-$mode -- --steps 40 --log-every 20; done
for round in 1 2 3; do
  for mode in default own; do
    e=(X=1); [[ $mode == own ]] && e=($R)
    run ss-$mode "${e[@]}" KILN_CACHE_DIR=/tmp/warm-$mode -- --steps 1000 --log-every 100
    echo "round $round $mode warm cache: $(awk -F, 'NR>1 && ($1==1||$1==100||$1==1000) {printf "%s=%s,%s ", $1, $2, $4}' /tmp/o-ss-$mode/loss.csv) ms/step(100-1000) $(awk -F, '$1==100{a=$4} $1==1000{b=$4} END{printf "%.3f", (b-a)/900*1000}' /tmp/o-ss-$mode/loss.csv)"
  done
done 2>&1 | tee $OUT/steady.txt
KILN_DUMP=plan PROBE_TILE_LOG2=28 PROBE_DOT_MAX_K=4096 KILN_CACHE_DIR=/tmp/warm-own build-gpu/samples/kiln-rnn --device cuda --steps 2 --out /tmp/o-dump 2>&1 >/dev/null | grep -c "gemm f32" | sed 's/^/own: gemm lines in plans: /'
echo "total $(( $(date +%s) - t0 )) s"
