#!/usr/bin/env bash
# Session 31 call 5: is the H100 host's 2x process-to-process spread of the natural seed loop
# (no eval) where the process's threads land? Topology, then the loop in processes unpinned and
# pinned (taskset) to two CPUs of different cores, to one core's two hyperthreads, and to one CPU.
set -uo pipefail
t0=$(date +%s)
lscpu | grep -E "^CPU\(s\)|Thread|Core|Socket|NUMA node|Model name"
lscpu -e=CPU,CORE,SOCKET,NODE | head -20
llvm_opt=(-DKILN_LLVM_ROOT="$PWD/.deps/llvm")
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B build-gpu "${gen[@]}" -DCMAKE_BUILD_TYPE=Release "${llvm_opt[@]}" > /tmp/cfg.log 2>&1 || { tail -20 /tmp/cfg.log; exit 1; }
cmake --build build-gpu -j16 --target kiln > /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
g++ -std=c++20 -O2 -Iinclude -Ibuild-gpu/generated/include scripts/tmp/merge_probe.cpp -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/mp || exit 1
P="/tmp/mp 4096 64 0 0"
KILN_COMPILE=sync $P > /dev/null 2>&1 # the disk cache warm
run() { local label=$1; shift; for i in 1 2 3 4; do echo "$label: $("$@" $P 2>&1 | head -1)"; done; }
run unpinned env
siblings=$(cat /sys/devices/system/cpu/cpu2/topology/thread_siblings_list)
echo "cpu2 siblings: $siblings"
run "cpus 2,6" taskset -c 2,6
run "siblings $siblings" taskset -c "$siblings"
run "cpu 2 alone" taskset -c 2
run "cpus 2,4,6,8" taskset -c 2,4,6,8
echo "total $(( $(date +%s) - t0 )) s"
