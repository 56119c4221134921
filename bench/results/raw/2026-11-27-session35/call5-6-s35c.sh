#!/usr/bin/env bash
# Session 35 call 5: the CUDA suite at the working tree (K groups' partial tiles swizzled, not
# shifted; sums in registers), then the same A/B as call 3 against 5223a2d with fresh caches.
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/old && tar -xf scripts/tmp/old.tar -C /tmp/old
llvm=$PWD/.deps/llvm
(cd /tmp/old && cmake -S . -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_LLVM_ROOT=$llvm > /tmp/old-conf.log 2>&1 &&
  cmake --build build-old -j${OLD_JOBS:-6} --target rnn_gpu > /tmp/old-build.log 2>&1; echo "old build rc=$? $(( $(date +%s) - t0 )) s") &
[[ ${SKIP_SUITE:-0} == 1 ]] || { OUT=$OUT scripts/gpu-check suite > $OUT/suite.txt 2>&1; echo "suite rc=$? $(( $(date +%s) - t0 )) s"
tail -6 $OUT/suite.txt; grep -h "FAILED  \]" $OUT/tests-cuda.log | sort -u | head -30; }
wait
probe() { # name, source dir, build dir
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
        KILN_CACHE_DIR=/tmp/kc5-$v KILN_COMPILE=sync CUDA_INJECTION64_PATH=/tmp/libkt.so KERNEL_TRACE_OUT=/tmp/tr.csv /tmp/probe-$v $c 4000 $m > /tmp/p.txt 2>&1
        echo "r$r $c $v $m: $(grep -E 'us/step' /tmp/p.txt | head -1 | cut -c1-70) | $(python3 bench/gpu_timeline.py /tmp/tr.csv --steps 3000 --per-step 1 --top 1 2>/dev/null | sed -n 2p)"
      done
    done
  done
done 2>&1 | tee $OUT/trace-ab.txt
for r in 1 2; do
  for v in old new; do
    if [[ $v == old ]]; then b=/tmp/old/build-old/bench/rnn_gpu; else b=build-gpu/bench/rnn_gpu; fi
    for c in "seed d=64" "LSTM batch 32"; do
      f=$OUT/rnn-$v-$r-${c//[ =]/_}.md
      KILN_COMPILE=sync KILN_CACHE_DIR=/tmp/kc5-$v timeout 90 $b 3000 3 "$c" > $f 2>&1
      echo "r$r $v $c rc=$?"
      grep -E "CUDA graphs \||no eval in the loop \||ERROR| NO " $f | grep -v "| 1.00 |\|| 0.03 |\|| 0.13 |" | cut -d'|' -f2-6,10-13
    done
  done
done 2>&1 | tee $OUT/rnn-ab.txt
echo "total $(( $(date +%s) - t0 )) s"
