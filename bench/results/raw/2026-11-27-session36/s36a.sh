#!/usr/bin/env bash
# Prepared in session 35, not run. Where the host is fast the seed loop without eval is bound
# by the GPU at 2.00-2.02 us a step (2026-11-27-h100-session35.md, call 13): a kernel a step,
# ~1.96 us of GPU time, and ~0.14 us a step of idle GPU between CUDA graphs of 32 steps (call 11).
# Do loop flushes of 512 nodes (64 seed steps a graph) pay where the GPU is the bound? Call 14
# ran loop_forms only in host-bound processes (512 within 5% of 256 there). Six processes, each
# with its host speed probe; read the rows of the processes whose host is fast.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_forms.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/loop_forms || exit 1
echo "built $(( $(date +%s) - t0 )) s"
KILN_COMPILE=sync timeout 60 /tmp/loop_forms 300 seed > /dev/null 2>&1
for p in 1 2 3 4 5 6; do
  echo "== process $p"
  KILN_COMPILE=sync timeout 60 /tmp/loop_forms 3000 seed 2>&1 | grep -E "probe|eval every step|no eval  |<= "
done | tee $OUT/flush-bounds.txt
echo "total $(( $(date +%s) - t0 )) s"
