#!/usr/bin/env bash
# Session 35 call 3: GEMM tiles' K groups parked skewed and added in registers (codegen v15,
# working tree) against 5223a2d (scripts/tmp/old.tar), built side by side. GPU time per step from
# a CUPTI kernel trace (the probe's E mode: a graph per step, so a kernel's interval is its body;
# N mode: no eval, kernels chained with PDL), then rnn_gpu's rows, alternated, two rounds.
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/old && tar -xf scripts/tmp/old.tar -C /tmp/old
llvm=(-DKILN_LLVM_ROOT=$PWD/.deps/llvm)
(cd /tmp/old && cmake -S . -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release "${llvm[@]}" > /tmp/old-conf.log 2>&1 &&
  cmake --build build-old -j6 --target rnn_gpu > /tmp/old-build.log 2>&1; echo "old build rc=$?") &
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
wait
echo "built $(( $(date +%s) - t0 )) s"
ls /tmp/old/build-old/bench/rnn_gpu build-gpu/bench/rnn_gpu || { tail -20 /tmp/old-build.log; exit 1; }
probe() { # name, include dir, lib dir
  g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I$2 -I$2/include -I$2/bench \
    -I$3/generated/include -I$PWD/.deps/llvm/include $2/tools/host-probe/loop_no_eval.cpp \
    -L$3 -lkiln -Wl,-rpath,$3 -o /tmp/probe-$1
}
probe new $PWD $PWD/build-gpu && probe old /tmp/old /tmp/old/build-old || exit 1
g++ -O2 -shared -fPIC bench/cupti/kernel_trace.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcupti -o /tmp/libkt.so || exit 1
for r in 1 2; do
  for c in seed64 lstm32; do
    for v in old new; do
      for m in E N; do
        KILN_CACHE_DIR=/tmp/kc-$v KILN_COMPILE=sync CUDA_INJECTION64_PATH=/tmp/libkt.so KERNEL_TRACE_OUT=/tmp/tr.csv /tmp/probe-$v $c 4000 $m > /tmp/p.txt 2>&1
        echo "r$r $c $v $m: $(grep -E 'us/step' /tmp/p.txt | head -1 | cut -c1-70) | $(python3 bench/gpu_timeline.py /tmp/tr.csv --steps 3000 --per-step 1 --top 1 2>/dev/null | sed -n 1,2p | tr '\n' ' ')"
      done
    done
  done
done | tee $OUT/trace-ab.txt
for r in 1 2; do
  for v in old new; do
    if [[ $v == old ]]; then b=/tmp/old/build-old/bench/rnn_gpu; else b=build-gpu/bench/rnn_gpu; fi
    for c in "seed d=64" "LSTM batch 32"; do
      KILN_CACHE_DIR=/tmp/kc-$v timeout 90 $b 3000 3 "$c" > $OUT/rnn-$v-$r-${c// /_}.md 2>&1
      echo "r$r $v $c rc=$?"
      grep -E "CUDA graphs \||no eval in the loop \||^target \(issue 20\)|ERROR| NO " $OUT/rnn-$v-$r-${c// /_}.md | grep -v "| 1.00 |\|| 0.03 |" | cut -d'|' -f2-6,10-13
    done
  done
done 2>&1 | tee $OUT/rnn-ab.txt
echo "total $(( $(date +%s) - t0 )) s"
