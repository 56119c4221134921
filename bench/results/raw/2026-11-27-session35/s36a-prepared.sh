#!/usr/bin/env bash
# Prepared in session 35, not run: how often does each of issue 20's no-eval targets hold, at
# the code as it is, across processes? The host's speed on the device machine varies ~2x between
# processes (2026-11-27-h100-session35.md, call 10), so one rnn_gpu run says little. Six
# processes of rnn_gpu's three batch-1 loops, each timed with the GPU's own time beside it (a
# CUPTI kernel trace of the probe's no-eval mode), so a miss can be read as host- or GPU-bound.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/probe || exit 1
g++ -O2 -shared -fPIC bench/cupti/kernel_trace.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcupti -o /tmp/libkt.so || exit 1
echo "built $(( $(date +%s) - t0 )) s"
for p in 1 2 3 4 5 6; do
  for c in "seed d=64" "LSTM batch 1" "GRU batch 1"; do
    timeout 60 build-gpu/bench/rnn_gpu 3000 3 "$c" > /tmp/r.md 2>&1
    echo "p$p $c: $(grep -E "^target \(issue 20\): $c" /tmp/r.md | sed 's/.*: //') host $(grep -E "^\| $c \| kiln GPU lazy, CUDA graphs, no eval in the loop \| [0-9]+ \|" /tmp/r.md | cut -d'|' -f10)"
  done
done | tee $OUT/processes.txt
for c in seed64 lstm1; do # one kernel a step each (the GRU: check its count first)
  CUDA_INJECTION64_PATH=/tmp/libkt.so KERNEL_TRACE_OUT=/tmp/tr.csv /tmp/probe $c 4000 N > /tmp/p.txt 2>&1
  echo "$c N: $(grep -E 'us/step' /tmp/p.txt | head -1 | cut -c1-70) | $(python3 bench/gpu_timeline.py /tmp/tr.csv --steps 3000 --per-step 1 --top 1 | sed -n 2p)"
done | tee $OUT/gpu-time.txt
echo "total $(( $(date +%s) - t0 )) s"
