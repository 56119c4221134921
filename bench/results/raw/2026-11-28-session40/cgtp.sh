#!/bin/bash
# host instructions per natural training step (train_probe H=4: LSTM over 64 steps, Adam), CPU
# kernels' work subtracted; (run of 60 steps - run of 30) / 30
p=${PROBE:-/tmp/train_probe}
tot() {
  f=/tmp/cgtp.$1${TAG:-}.out
  KILN_SMALL_MATMUL=all KILN_DEVICE=cpu valgrind --tool=callgrind --callgrind-out-file=$f $p 4 $1 > /dev/null 2>&1
  callgrind_annotate --inclusive=yes --threshold=100 --auto=no $f 2>/dev/null > $f.txt
  t=$(grep "PROGRAM TOTALS" $f.txt | awk '{gsub(",","",$1); print $1}')
  rk=$(grep "CpuBackend::run_kernel" $f.txt | head -1 | awk '{gsub(",","",$1); print $1}')
  echo $(( t - rk ))
}
a=$(tot 30); b=$(tot 60)
echo "training step host instrs $(( (b - a) / 30 ))"
