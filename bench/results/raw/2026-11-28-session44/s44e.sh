#!/usr/bin/env bash
# Session 44 call 5: the CUDA suite at this session's code (KILN_CUBLAS, the exit guard, the
# stand-in's dot chains; the new NoCublasGpu tests among them), then issue 19's first training
# steps of samples/rnn: default against KILN_CUBLAS=0, on an empty and a warm disk cache, the
# steady state, whether libcublas is loaded, and PyTorch's first training steps beside them.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check suite > $OUT/suite.txt 2>&1; echo "suite rc $? $(( $(date +%s) - t0 )) s"
tail -8 $OUT/suite.txt
grep -E "NoCublas|BackgroundBuilds" $OUT/tests-cuda.log | grep -E "OK|FAILED|SKIPPED" | head -8
RNN=(build-gpu/samples/kiln-rnn --device cuda --checkpoint-every 1000000 --val-every 100000)
d=$(mktemp -d); KILN_CACHE_DIR=$d "${RNN[@]}" --steps 2 --out /tmp/r0 > /dev/null 2>&1; rm -rf $d /tmp/r0
for r in 1 2 3; do
  for m in default KILN_CUBLAS=0; do
    e=(X=1); [[ $m != default ]] && e=($m)
    d=$(mktemp -d); env "${e[@]}" KILN_CACHE_DIR=$d "${RNN[@]}" --steps 5 --log-every 1 --out /tmp/r1 > /dev/null 2>&1
    echo "first steps, empty cache, $m run $r rc $? kernels $(find $d -name '*.kce' | wc -l): $(tail -n +2 /tmp/r1/loss.csv | cut -d, -f1,4 | tr '\n' ' ')"
    rm -rf $d /tmp/r1
  done
done 2>&1 | tee $OUT/first-steps.txt
for m in default KILN_CUBLAS=0; do
  e=(X=1); [[ $m != default ]] && e=($m)
  d=/tmp/warm-${m//=/}; rm -rf $d; mkdir -p $d
  env "${e[@]}" KILN_CACHE_DIR=$d "${RNN[@]}" --steps 50 --out /tmp/r2 > /dev/null 2>&1
  for r in 1 2 3; do
    env "${e[@]}" KILN_CACHE_DIR=$d "${RNN[@]}" --steps 1000 --log-every 100 --out /tmp/r2 > /dev/null 2>&1
    awk -F, -v m=$m -v r=$r '$1==100{a=$4} $1==1000{b=$4} END{printf "steady %s run %d: %.3f ms a step (steps 100-1000)\n", m, r, (b-a)/900*1000}' /tmp/r2/loss.csv
  done
  for r in 1 2; do
    env "${e[@]}" KILN_CACHE_DIR=$d "${RNN[@]}" --steps 5 --log-every 1 --out /tmp/r1 > /dev/null 2>&1
    echo "first steps, warm disk cache, $m run $r rc $?: $(tail -n +2 /tmp/r1/loss.csv | cut -d, -f1,4 | tr '\n' ' ')"
  done
  n=$(env "${e[@]}" KILN_CACHE_DIR=$d LD_DEBUG=files "${RNN[@]}" --steps 30 --log-every 10 --val-every 10 --out /tmp/r1 2>&1 >/dev/null | grep -c "file=libcublas")
  echo "$m: libcublas* opened $n times in a 30-step run with validation"
done 2>&1 | tee $OUT/steady.txt
echo "t $(( $(date +%s) - t0 )) s"
for mode in lstmcell cudnn; do for r in 1 2 3; do
  echo "torch $mode run $r: $(python3 bench/torch/first_train_step_torch.py $mode 2>&1 | tail -3 | tr '\n' ' ')"
done; done 2>&1 | tee $OUT/torch-first.txt
rm -f $OUT/build.log $OUT/configure.log
echo "total $(( $(date +%s) - t0 )) s"
