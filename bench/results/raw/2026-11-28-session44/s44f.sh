#!/usr/bin/env bash
# Session 44 call 6: call 5 found libcublas loaded with KILN_CUBLAS=0 (the device probe checked
# that cuBLAS loads); now the probe skips it. The NoCublasGpu and BackgroundBuilds tests, the
# libraries a KILN_CUBLAS=0 run opens, and the sample's first steps once more.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
KILN_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 build-gpu/tests/kiln_tests --gtest_brief=1 \
  --gtest_filter='NoCublas*:BackgroundBuilds*:CudaLibraries*' 2>&1 | tail -4
RNN=(build-gpu/samples/kiln-rnn --device cuda --checkpoint-every 1000000 --val-every 100000)
d=$(mktemp -d)
n=$(KILN_CUBLAS=0 KILN_CACHE_DIR=$d LD_DEBUG=files "${RNN[@]}" --steps 30 --log-every 10 --val-every 10 --out /tmp/r1 2>&1 >/dev/null | grep -c "file=libcublas")
echo "KILN_CUBLAS=0: libcublas* opened $n times in a 30-step run with validation"
n=$(KILN_CACHE_DIR=$d LD_DEBUG=files "${RNN[@]}" --steps 30 --log-every 10 --val-every 10 --out /tmp/r1 2>&1 >/dev/null | grep -c "file=libcublas")
echo "default: libcublas* opened $n times in a 30-step run with validation"
rm -rf $d
for r in 1 2 3; do
  for m in default KILN_CUBLAS=0; do
    e=(X=1); [[ $m != default ]] && e=($m)
    d=$(mktemp -d); env "${e[@]}" KILN_CACHE_DIR=$d "${RNN[@]}" --steps 5 --log-every 1 --out /tmp/r1 > /dev/null 2>&1
    echo "first steps, empty cache, $m run $r rc $?: $(tail -n +2 /tmp/r1/loss.csv | cut -d, -f1,4 | tr '\n' ' ')"
    rm -rf $d /tmp/r1
  done
done 2>&1 | tee $OUT/first-steps.txt
rm -f $OUT/b.txt $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
