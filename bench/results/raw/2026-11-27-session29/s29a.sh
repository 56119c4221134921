#!/usr/bin/env bash
# Session 29 call 1: scratch KILN_SCRATCH_PDL (0: as committed; 1: every kernel triggers its
# dependents right after its wait; 2: as 1, and dot kernels prefetch their B operands' K range
# into L1 before the wait). rnn_gpu's rows (compiled step, natural loop) for seed d=64, LSTM b1,
# GRU b1, each variant with its own kernel cache, alternated.
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/o
scripts/gpu-check build > /tmp/o/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
for r in 1 2; do
  for c in "seed d=64" "LSTM batch 1" "GRU batch 1"; do
    for v in 0 1 2; do
      (( $(date +%s) - t0 > 530 )) && break 3
      f=/tmp/o/r$r-v$v-${c// /_}.md
      KILN_SCRATCH_PDL=$v KILN_CACHE_DIR=/tmp/kc-$v KILN_COMPILE=sync build-gpu/bench/rnn_gpu 2000 3 "$c" > "$f" 2>&1
      echo "r$r v$v $c rc=$? $(( $(date +%s) - t0 )) s"
      grep -E "^\| .* \| (kiln GPU lazy, CUDA graphs|kiln GPU lazy, CUDA graphs, no eval in the loop|kiln GPU, the step compiled \(kiln::compile\)) \| [0-9]+ \| [0-9.]+ \| [0-9.]+-[0-9.]+ \|" "$f" | cut -d'|' -f2-6
      grep -E "\| NO \|" "$f"
    done
  done
done
tar czf $OUT/s29a.tgz -C /tmp/o .
echo "total $(( $(date +%s) - t0 )) s"
