#!/usr/bin/env bash
# Session 35 call 14: loop flush bounds of 512 and 1024 nodes against 256 (loop_forms, forms
# alternated in one process): a CUDA graph's replay waits for the one before it, ~4.5 us of
# idle GPU each (the seed's trace: busy 1.96 us a step, span 2.1, 32 steps a graph).
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_forms.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/loop_forms || exit 1
echo "built $(( $(date +%s) - t0 )) s"
KILN_COMPILE=sync timeout 60 /tmp/loop_forms 300 seed > /dev/null 2>&1
for p in 1 2; do
  echo "== process $p"
  KILN_COMPILE=sync timeout 90 /tmp/loop_forms 2000 2>&1 | grep -E "eval every step|no eval  |<= "
done | tee $OUT/flush-bounds.txt
echo "total $(( $(date +%s) - t0 )) s"
