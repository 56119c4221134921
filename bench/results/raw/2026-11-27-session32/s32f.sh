#!/usr/bin/env bash
# Session 32 call 6: build; the plan key walk's prefetching A/B (loop_forms, 3 processes; the
# forms alternated in each); then the CUDA suite at this tree (scripts/gpu-check suite).
set -uo pipefail
t0=$(date +%s)
scripts/gpu-check build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_forms.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/loop_forms || exit 1
KILN_COMPILE=sync /tmp/loop_forms 300 > /dev/null 2>&1
for p in 1 2 3; do echo "== process $p"; timeout 60 /tmp/loop_forms 3000; done 2>&1 | tee $OUT/prefetch-ab.txt
echo "A/B done $(( $(date +%s) - t0 )) s"
OUT=$OUT/suite scripts/gpu-check suite 2>&1 | tail -25
echo "total $(( $(date +%s) - t0 )) s"
