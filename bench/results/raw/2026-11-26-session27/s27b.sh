#!/usr/bin/env bash
# Session 27 call 2: GPU kernel time per step of loops without eval (CUPTI trace), and the host
# profile of the LSTM b1 loop without eval.
set -uo pipefail
t0=$(date +%s)
scripts/gpu-check build > /tmp/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
g++ -std=c++20 -O2 -g -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/loop_probe || exit 1
g++ -O2 -shared -fPIC -o /tmp/libsampler.so scripts/tmp/prof/sampler.cpp || exit 1
g++ -O2 -shared -fPIC bench/cupti/kernel_trace.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcupti -o /tmp/libkt.so || exit 1
export KILN_CACHE_DIR=/tmp/kc27
for c in seed64 lstm1 gru1; do
  for m in N E; do
    CUDA_INJECTION64_PATH=/tmp/libkt.so KERNEL_TRACE_OUT=/tmp/tr-$c-$m.csv /tmp/loop_probe $c 5000 $m 2>/dev/null | grep us/step
    echo "$c $m: $(python3 bench/gpu_timeline.py /tmp/tr-$c-$m.csv --steps 4000 --per-step 1 --top 3 | head -5 | tr '\n' ' ')"
  done
done
for c in lstm1; do
  PROF_US=100 PROF_OUT=/tmp/prof-$c.txt LD_PRELOAD=/tmp/libsampler.so /tmp/loop_probe $c 40000 N 2>/dev/null | grep us/step
  cp /tmp/prof-$c.txt $OUT/raw-prof-$c.txt
  python3 scripts/tmp/prof/report.py /tmp/prof-$c.txt Lstm::cell > $OUT/prof-$c.txt 2>&1
  head -60 $OUT/prof-$c.txt | cut -c1-180; grep -A40 "== self" $OUT/prof-$c.txt | cut -c1-160
done
echo "total $(( $(date +%s) - t0 )) s"
