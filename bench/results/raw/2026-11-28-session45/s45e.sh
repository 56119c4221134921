#!/usr/bin/env bash
# Session 45 call 5: the final code's CUDA suite (gpu-check suite, which also runs the exit
# checks), the new tests again in a fresh process with poisoned allocations, and the sample's
# later steps by cuBLAS setting (does the default switch to cuBLAS and stay as fast as waiting).
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail -30 $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
KILN_POISON_ALLOCATIONS=1 build-gpu/tests/kiln_tests --gtest_brief=1 --gtest_filter='CublasSetUpGpu.*' 2>&1 | tail -6
RNN=(build-gpu/samples/kiln-rnn --device cuda --steps 600 --log-every 100 --val-every 100000 --checkpoint-every 1000000)
d=/tmp/warm-s45e; rm -rf $d; mkdir -p $d
KILN_CACHE_DIR=$d "${RNN[@]}" --out /tmp/r0 > /dev/null 2>&1
echo "| setting | s at step 100 | 200 | 400 | 600 | ms/step, steps 200-600 |"
for r in 1 2 3; do for t in default KILN_CUBLAS=wait KILN_CUBLAS=0; do
  env_t=(X=1); [[ $t != default ]] && env_t=("$t")
  env "${env_t[@]}" KILN_CACHE_DIR=$d "${RNN[@]}" --out /tmp/r1 > /dev/null 2>&1 || echo "failed $t"
  awk -F, -v t=$t 'NR > 1 { e[$1] = $4 } END { printf "| %s | %s | %s | %s | %s | %.3f |\n", t, e[100], e[200], e[400], e[600], (e[600] - e[200]) * 1000 / 400 }' /tmp/r1/loss.csv
done; done
echo "sample done $(( $(date +%s) - t0 )) s"
OUT=$OUT scripts/gpu-check suite > $OUT/suite.txt 2>&1; echo "suite rc $? $(( $(date +%s) - t0 )) s"
tail -10 $OUT/suite.txt
rm -f $OUT/b.txt $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
