#!/bin/bash
# host instructions per step of a loop without eval: callgrind total minus the CPU kernels' work
# (CpuBackend::run_kernel) and the loader (_dl_start), over the probe's 5,000 steps
cell=$1; t=$2
f=/tmp/cg.$cell.T$t${TAG:-}.out
KILN_LOOP_TEMPLATE=$t KILN_SMALL_MATMUL=all KILN_DEVICE=cpu valgrind --tool=callgrind --callgrind-out-file=$f ${PROBE:-/tmp/loop_probe} $cell 3000 b > /dev/null 2>&1
callgrind_annotate --inclusive=yes --threshold=100 --auto=no $f 2>/dev/null > $f.txt
tot=$(grep "PROGRAM TOTALS" $f.txt | awk '{gsub(",","",$1); print $1}')
rk=$(grep "CpuBackend::run_kernel" $f.txt | head -1 | awk '{gsub(",","",$1); print $1}')
dl=$(grep "rtld.c:_dl_start" $f.txt | head -1 | awk '{gsub(",","",$1); print $1}')
echo "$cell T=$t host instrs/step $(( (tot - rk - dl) / 5000 ))"
