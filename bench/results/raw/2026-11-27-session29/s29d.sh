#!/usr/bin/env bash
# Session 29 call 4: KILN_SCRATCH_TOUCH 0 / 1 (thread 0 touches the Params' lines before the
# wait) / 2 (the block's last thread does, outside warp 0, whose ty = 0 threads run the tape):
# CUPTI kernel time and rnn_gpu compiled rows, alternated; then the SASS heads of the LSTM cell's
# kernel in each cache.
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/o
scripts/gpu-check build > /tmp/o/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/probe || exit 1
g++ -O2 -shared -fPIC bench/cupti/kernel_trace.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcupti -o /tmp/libkt.so || exit 1
for r in 1 2; do
  for c in lstm1 gru1; do
    for t in 0 1 2; do
      export KILN_SCRATCH_TOUCH=$t KILN_CACHE_DIR=/tmp/kc-$t KILN_COMPILE=sync
      CUDA_INJECTION64_PATH=/tmp/libkt.so KERNEL_TRACE_OUT=/tmp/tr.csv /tmp/probe $c 4000 E > /dev/null 2>&1
      echo "r$r $c touch$t traced E: $(python3 bench/gpu_timeline.py /tmp/tr.csv --steps 3000 --per-step 1 --top 1 2>/dev/null | sed -n 2p)"
    done
  done
  for c in "LSTM batch 1" "GRU batch 1"; do
    for t in 0 1 2; do
      f=/tmp/o/r$r-touch$t-${c// /_}.md
      KILN_SCRATCH_TOUCH=$t KILN_CACHE_DIR=/tmp/kc-$t KILN_COMPILE=sync build-gpu/bench/rnn_gpu 2000 3 "$c" > "$f" 2>&1
      echo "r$r touch$t $c rc=$? $(grep -E "step compiled" "$f" | grep -E "\| [0-9.]+-[0-9.]+ \|" | cut -d'|' -f2,5,6 | tr '\n' ';')"
      grep -E "\| NO \|" "$f"
    done
  done
  unset KILN_SCRATCH_TOUCH
done
for t in 0 1 2; do
  for name in $(build-gpu/tools/kiln-cache/kiln-cache --dir /tmp/kc-$t list 2>/dev/null | grep -o "kiln_[a-z_]*etc_f32_sm90_[0-9a-f]*" | sort -u); do
    build-gpu/tools/kiln-cache/kiln-cache --dir /tmp/kc-$t show --sass "$name" > /tmp/o/sass-touch$t-$name.txt 2>&1
  done
done
ls /tmp/o | head -40
tar czf $OUT/s29d.tgz -C /tmp/o .
echo "total $(( $(date +%s) - t0 )) s"
