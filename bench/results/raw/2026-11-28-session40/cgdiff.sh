#!/bin/bash
# steady-state host instructions a step: (run of N2 steps - run of N1 steps) / (N2 - N1), both
# minus the CPU kernels' work (CpuBackend::run_kernel); the loop probe's mode b (no eval, busy)
cell=$1; n1=${N1:-2000}; n2=${N2:-6000}
tot() {
  f=/tmp/cgd.$cell.$1${TAG:-}.out
  KILN_LOOP_TEMPLATE=1 KILN_SMALL_MATMUL=all KILN_DEVICE=cpu valgrind --tool=callgrind --callgrind-out-file=$f ${PROBE:-/tmp/loop_probe} $cell $1 b > /dev/null 2>&1
  callgrind_annotate --inclusive=yes --threshold=100 --auto=no $f 2>/dev/null > $f.txt
  t=$(grep "PROGRAM TOTALS" $f.txt | awk '{gsub(",","",$1); print $1}')
  rk=$(grep "CpuBackend::run_kernel" $f.txt | head -1 | awk '{gsub(",","",$1); print $1}')
  echo $(( t - rk ))
}
a=$(tot $n1); b=$(tot $n2)
echo "$cell steady host instrs/step $(( (b - a) / (n2 - n1) ))"
