#!/usr/bin/env bash
# Session 37 call 2: issue 20's evidence at HEAD (dot kernels without clusters for short dots): rnn_gpu (every case, every form) and
# PyTorch's forms of the same loops in one call, then rnn_gpu once more.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
timeout 200 build-gpu/bench/rnn_gpu 5000 3 > $OUT/bench-rnn_gpu-run1.md 2>&1; echo "rnn_gpu rc=$? $(( $(date +%s) - t0 )) s"
grep -E "^target|^ERROR" $OUT/bench-rnn_gpu-run1.md
PYTHONUNBUFFERED=1 timeout 240 python3 bench/torch/rnn_torch.py --steps 3000 --reps 3 --compile-budget 30 > $OUT/bench-torch-rnn.md 2>&1; echo "torch rc=$? $(( $(date +%s) - t0 )) s"
left=$(( 560 - ($(date +%s) - t0) ))
if (( left > 100 )); then
  timeout $left build-gpu/bench/rnn_gpu 5000 3 > $OUT/bench-rnn_gpu-run2.md 2>&1; echo "rnn_gpu run 2 rc=$?"
  grep -E "^target|^ERROR" $OUT/bench-rnn_gpu-run2.md
fi
echo "total $(( $(date +%s) - t0 )) s"
