#!/usr/bin/env bash
# Session 32 call 5: is the H100 host's per-process speed spread (~1.4x) the heap's physical
# pages? loop_forms (seed d=64, LSTM and GRU b1, eval every step vs no eval) in processes
# alternated: default malloc against GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (the heap on
# transparent huge pages), 6 each; the THP settings and each process's AnonHugePages.
set -uo pipefail
t0=$(date +%s)
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B build-gpu "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DKILN_LLVM_ROOT="$PWD/.deps/llvm" > /tmp/cfg.log 2>&1 || { tail -20 /tmp/cfg.log; exit 1; }
cmake --build build-gpu -j16 --target kiln > /tmp/b.log 2>&1 || { grep -E "error" /tmp/b.log | head; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_forms.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/loop_forms || exit 1
KILN_COMPILE=sync /tmp/loop_forms 300 > /dev/null 2>&1
echo "THP enabled: $(cat /sys/kernel/mm/transparent_hugepage/enabled) defrag: $(cat /sys/kernel/mm/transparent_hugepage/defrag)"
lscpu | grep -E "Model name|L2|L3|NUMA node0|Thread" 
one() { # label env
  local label=$1; shift
  env "$@" /tmp/loop_forms 3000 > /tmp/lf.txt 2>&1 &
  local pid=$!; sleep 2; local huge=$(grep AnonHugePages /proc/$pid/smaps_rollup 2>/dev/null | awk '{print $2}')
  wait $pid
  echo "== $label AnonHugePages ${huge:-?} kB"; grep -E "eval every step|<= 256" /tmp/lf.txt
}
for i in 1 2 3 4 5 6; do
  one "default $i" X=1
  one "hugetlb $i" GLIBC_TUNABLES=glibc.malloc.hugetlb=1
done 2>&1 | tee $OUT/thp.txt
echo "total $(( $(date +%s) - t0 )) s"
