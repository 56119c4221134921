#!/usr/bin/env bash
# Session 38 call 3: the CUDA suite at the session's last library code (loop templates and the
# trims after call 2), then rnn_gpu and PyTorch's forms once more if time is left.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check suite > $OUT/suite.txt 2>&1; rc=$?
tail -7 $OUT/suite.txt; echo "suite rc $rc, $(( $(date +%s) - t0 )) s"
grep -hE "^\[  FAILED|Failure" $OUT/tests-cuda*.log 2>/dev/null | head -10
grep -hE "LoopTemplate" $OUT/tests-cuda*.log 2>/dev/null | grep -E "OK|FAILED" | head -8
left=$(( 585 - ($(date +%s) - t0) ))
if (( left > 60 )); then
  timeout $(( left > 70 ? 70 : left )) build-gpu/bench/rnn_gpu 5000 3 > $OUT/bench-rnn_gpu.md 2>&1; echo "rnn_gpu rc=$? $(( $(date +%s) - t0 )) s"
  grep -E "^target \(issue 20\)|^ERROR|host speed" $OUT/bench-rnn_gpu.md
fi
left=$(( 585 - ($(date +%s) - t0) ))
if (( left > 100 )); then
  PYTHONUNBUFFERED=1 timeout $left python3 bench/torch/rnn_torch.py --steps 3000 --reps 3 --compile-budget 30 > $OUT/bench-torch-rnn.md 2>&1; echo "torch rc=$? $(( $(date +%s) - t0 )) s"
fi
echo "total $(( $(date +%s) - t0 )) s"
