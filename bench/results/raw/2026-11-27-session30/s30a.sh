#!/usr/bin/env bash
# Session 30 call 1: how low a step of the seed loop (d=64) and the LSTM cell (batch 1, hidden
# 256) can go on the H100 when all steps run in one persistent kernel (hand-written probe,
# persistent_steps.cu), beside a kernel per step in a PDL graph, kiln's rows (rnn_gpu) and
# PyTorch's (rnn_torch.py), in one call.
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/o
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > /tmp/o/gpu.txt
which nvcc || export PATH=/usr/local/cuda/bin:$PATH
nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/ps scripts/tmp/persistent_steps.cu > /tmp/o/nvcc.out 2>&1; echo "nvcc rc=$?"
for r in 1 2; do /tmp/ps 2000 5 > /tmp/o/ps$r.md 2>&1; echo "probe r$r rc=$?"; cat /tmp/o/ps$r.md; done
/tmp/ps 20000 3 > /tmp/o/ps20k.md 2>&1; echo "probe 20k rc=$?"; cat /tmp/o/ps20k.md
scripts/gpu-check build > /tmp/o/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
for c in "seed d=64" "LSTM batch 1"; do
  f=/tmp/o/kiln-${c// /_}.md
  build-gpu/bench/rnn_gpu 2000 3 "$c" > "$f" 2>&1
  echo "$c rc=$? $(( $(date +%s) - t0 )) s"
  grep -E "^\| .* \| (kiln GPU lazy, CUDA graphs|kiln GPU lazy, CUDA graphs, no eval in the loop|kiln GPU, the step compiled \(kiln::compile\)) \|" "$f" | cut -d'|' -f2-6
done
timeout 200 python3 bench/torch/rnn_torch.py --steps 2000 --reps 3 --compile-budget 60 > /tmp/o/torch.md 2>&1
echo "torch rc=$? $(( $(date +%s) - t0 )) s"
grep -iE "seed d=64|LSTM|CUDAGraph|cuDNN|^\|" /tmp/o/torch.md | head -60
tar czf $OUT/s30a.tgz -C /tmp/o .
echo "total $(( $(date +%s) - t0 )) s"
