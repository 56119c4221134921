#!/usr/bin/env bash
# The sample's first training steps on an empty cache, per KILN_COMPILE mode, 2 rounds
# alternating; and whether the loss curves of the modes are the same bits.
set -uo pipefail
b=${1:-build-gpu}
for round in 1 2; do
  for mode in background sync; do
    dir=$(mktemp -d /tmp/kiln-fs-XXXXXX)
    out=/tmp/fs-$mode-$round
    rm -rf $out
    t0=$(date +%s.%N)
    KILN_COMPILE=$mode KILN_CACHE_DIR=$dir $b/samples/kiln-rnn --device cuda --steps 300 --log-every 1 \
      --val-every 100000 --checkpoint-every 1000000 --out $out > $out.log 2>&1 || echo "failed $mode"
    t1=$(date +%s.%N)
    n=$(find "$dir" -name '*.kce' | wc -l)
    rm -rf "$dir"
    # elapsed_s of steps 1, 2, 5, 50, 300
    e=$(awk -F, 'NR>1 && ($1==1||$1==2||$1==5||$1==50||$1==300) {printf "%s=%s ", $1, $4}' $out/loss.csv)
    echo "round $round $mode: wall $(awk "BEGIN{print $t1-$t0}") s, kernels compiled $n, elapsed_s at step $e"
  done
done
cut -d, -f1-3 /tmp/fs-background-1/loss.csv > /tmp/a.csv; cut -d, -f1-3 /tmp/fs-sync-1/loss.csv > /tmp/s.csv
cmp /tmp/a.csv /tmp/s.csv && echo "loss curves: background and sync modes identical over $(wc -l < /tmp/a.csv) lines"
