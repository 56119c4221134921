#!/usr/bin/env bash
set -uo pipefail
/usr/local/cuda/bin/nvcc -O2 -o /tmp/cublas_first scripts/tmp/cublas/cublas_first.cpp -lcublas || exit 1
for r in 1 2 3; do for m in cold warm; do echo "== $m $r"; /tmp/cublas_first $m; done; done
