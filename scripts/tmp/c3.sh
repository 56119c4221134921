#!/usr/bin/env bash
set -uo pipefail
[[ -f build-gpu/libkiln.so ]] || scripts/gpu-check build > $OUT/build.txt 2>&1
g++ -std=c++20 -O2 -I. -I/usr/local/cuda/include scripts/tmp/pipe.cpp -o /tmp/pipe \
  -Lbuild-gpu -lkiln -L/usr/local/cuda/lib64 -lcudart -Wl,-rpath,$PWD/build-gpu || exit 1
/tmp/pipe | tee $OUT/pipe1.md
/tmp/pipe | tee $OUT/pipe2.md
