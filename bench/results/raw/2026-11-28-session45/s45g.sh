#!/usr/bin/env bash
# Session 45 call 7: the sample's first training step at fa65fac, more processes: 10 on an empty
# cache by default, 5 with KILN_CUBLAS=wait (alternating), then 5 by default on a warm disk cache.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail -30 $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
RNN=(build-gpu/samples/kiln-rnn --device cuda --steps 5 --log-every 1 --val-every 100000 --checkpoint-every 1000000)
row() { printf '| %s | %s | %s |\n' "$1" "$2" "$(tail -n +2 $3/loss.csv | cut -d, -f4 | paste -sd'|' | sed 's/|/ | /g')"; }
echo "| setting | cache | step 1 | step 2 | step 3 | step 4 | step 5 |"
echo "|---|---|---:|---:|---:|---:|---:|"
for r in 1 2 3 4 5 6 7 8 9 10; do
  for t in default KILN_CUBLAS=wait; do
    [[ $t == KILN_CUBLAS=wait && $r -gt 5 ]] && continue
    d=$(mktemp -d /tmp/kc-XXXXXX); env_t=(X=1); [[ $t != default ]] && env_t=("$t")
    env "${env_t[@]}" KILN_CACHE_DIR=$d "${RNN[@]}" --out $d/out > /dev/null 2>&1 || echo "failed $t"
    row "$t" empty $d/out; rm -rf $d
  done
done
d=/tmp/kc-warm; rm -rf $d; mkdir -p $d
KILN_CACHE_DIR=$d "${RNN[@]}" --steps 50 --out $d/o0 > /dev/null 2>&1
for r in 1 2 3 4 5; do KILN_CACHE_DIR=$d "${RNN[@]}" --out $d/out > /dev/null 2>&1 || echo failed; row default warm $d/out; done
rm -f $OUT/b.txt $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
