#!/usr/bin/env bash
# Session 46 call (prepared in session 45): what the switch to cuBLAS costs when its set-up
# finishes. The sample's first 40 steps, every step logged, on a warm disk cache, default against
# KILN_CUBLAS=wait and KILN_CUBLAS=0, 3 rounds alternating: per-step ms, so the step where the
# default replans for cuBLAS (and loads cuBLAS's kernels for each shape class) shows against the
# others. --val-every past the run: the last step validates in all three alike.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
RNN=(build-gpu/samples/kiln-rnn --device cuda --steps 40 --log-every 1 --val-every 100000 --checkpoint-every 1000000)
d=/tmp/kc-warm; rm -rf $d; mkdir -p $d
KILN_CACHE_DIR=$d "${RNN[@]}" --out $d/o0 > /dev/null 2>&1
for r in 1 2 3; do for t in default KILN_CUBLAS=wait KILN_CUBLAS=0; do
  env_t=(X=1); [[ $t != default ]] && env_t=("$t")
  env "${env_t[@]}" KILN_CACHE_DIR=$d "${RNN[@]}" --out $d/o1 > /dev/null 2>&1 || echo "failed $t"
  printf '| %s | %s |\n' "$t" "$(awk -F, 'NR > 1 { printf "%s%.1f", (NR > 2 ? " " : ""), ($4 - p) * 1000; p = $4 }' $d/o1/loss.csv)"
done; done | tee $OUT/steps.md
rm -f $OUT/b.txt $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
