#!/usr/bin/env bash
# Session 28 call 6: warm ncu of the LSTM and GRU cells' kernels at codegen v13; a scratch
# variant (KILN_SCRATCH_V1: only warp 0, which wrote the block's sums, arrives at the first
# cluster barrier with release semantics, the other warps relaxed) against v13 (CUPTI).
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/o
scripts/gpu-check build > /tmp/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
g++ -std=c++20 -O2 -g -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/loop_probe || exit 1
g++ -O2 -shared -fPIC bench/cupti/kernel_trace.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcupti -o /tmp/libkt.so || exit 1
export KILN_CACHE_DIR=/tmp/kc28 KILN_COMPILE=sync
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu)
for c in lstm1 gru1; do
  /tmp/loop_probe $c 3000 E > /dev/null 2>&1
  timeout 150 $NCU --launch-skip 2500 --launch-count 1 -k regex:kiln_ \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats \
    --warp-sampling-interval 0 --import-source no --cache-control none --clock-control none \
    -o /tmp/o/ncu-v13-$c /tmp/loop_probe $c 3000 E > /tmp/o/ncu-$c.log 2>&1; echo "ncu $c rc=$?"
  $NCU --import /tmp/o/ncu-v13-$c.ncu-rep --page details --print-details all 2>&1 | grep -E "  Duration|Registers Per" | sort -u
  $NCU --import /tmp/o/ncu-v13-$c.ncu-rep --page source --csv --print-source sass 2>/dev/null > /tmp/o/sass-v13-$c.csv
  python3 scripts/tmp/sass_top.py /tmp/o/sass-v13-$c.csv 40
done
for r in 1 2 3; do
  for c in lstm1 gru1; do
    for v in base v1; do
      if [[ $v == v1 ]]; then export KILN_SCRATCH_V1=1; else unset KILN_SCRATCH_V1; fi; export KILN_CACHE_DIR=/tmp/kc-$v
      CUDA_INJECTION64_PATH=/tmp/libkt.so KERNEL_TRACE_OUT=/tmp/tr.csv /tmp/loop_probe $c 4000 E > /dev/null 2>&1
      echo "r$r $c $v traced E: $(python3 bench/gpu_timeline.py /tmp/tr.csv --steps 3000 --per-step 1 --top 1 2>/dev/null | sed -n 2p)"
    done
  done
done
unset KILN_SCRATCH_V1
tar czf $OUT/s28e.tgz -C /tmp/o .
echo "total $(( $(date +%s) - t0 )) s"
