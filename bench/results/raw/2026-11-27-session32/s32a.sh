#!/usr/bin/env bash
# Session 32 call 1: build at HEAD; where cuBLAS's first GEMM goes (cublas_probe, fresh
# processes); the sample's first steps on an empty cache, default against --reproducible (every
# matmul kiln's own kernel, no cuBLAS); loop_forms at HEAD in two processes.
set -uo pipefail
t0=$(date +%s)
scripts/gpu-check build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
nvcc -std=c++17 -O2 scripts/tmp/cublas_probe.cpp -lcublasLt -lcublas -o /tmp/cbp || exit 1
for r in 1 2 3; do
  for m in cold warm0 warm50 warm150 lt; do /tmp/cbp $m; done
  CUDA_MODULE_LOADING=EAGER /tmp/cbp cold | sed 's/^/EAGER /'
done 2>&1 | tee $OUT/cublas.txt
echo "cublas done $(( $(date +%s) - t0 )) s"
for round in 1 2 3; do
  for mode in default reproducible; do
    dir=$(mktemp -d /tmp/kiln-fs-XXXXXX); out=/tmp/fs-$mode-$round; rm -rf $out
    flag=(); [[ $mode == reproducible ]] && flag=(--reproducible)
    s=$(date +%s.%N)
    KILN_CACHE_DIR=$dir build-gpu/samples/kiln-rnn --device cuda --steps 30 --log-every 1 \
      --val-every 100000 --checkpoint-every 1000000 --out $out "${flag[@]}" > $out.log 2>&1 || echo "failed $mode"
    e=$(awk -F, 'NR>1 && ($1==1||$1==2||$1==5||$1==30) {printf "%s=%s ", $1, $4}' $out/loss.csv)
    echo "round $round $mode: wall $(awk "BEGIN{print $(date +%s.%N)-$s}") s, elapsed_s at step $e"
    rm -rf $dir
  done
done 2>&1 | tee $OUT/first-step.txt
echo "first steps done $(( $(date +%s) - t0 )) s"
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_forms.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/loop_forms || exit 1
KILN_COMPILE=sync /tmp/loop_forms 300 > /dev/null 2>&1
for p in 1 2; do timeout 100 /tmp/loop_forms 3000 2>&1 | tee $OUT/loop_forms$p.txt; echo "process $p $(( $(date +%s) - t0 )) s"; done
