#!/usr/bin/env bash
# Session 28 call 7: the loop probe crashed under ncu in 3 of 6 runs (malloc(): unaligned tcache
# chunk; SIGSEGV). Where: the probe under ncu inside gdb (backtraces), and the probe built with
# AddressSanitizer (library and probe) on CUDA, with and without ncu.
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/o
scripts/gpu-check build > /tmp/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - t0 )) s"
(cmake -S . -B build-asan-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF \
  -DKILN_BUILD_BENCH=OFF -DKILN_BUILD_SAMPLES=OFF -DKILN_LLVM_ROOT=$PWD/.deps/llvm \
  -DCMAKE_CXX_FLAGS="-g -fno-omit-frame-pointer" -DKILN_SANITIZE=address > /tmp/o/asan-cfg.log 2>&1 && \
  cmake --build build-asan-gpu -j12 --target kiln > /tmp/o/asan-build.log 2>&1; echo "asan build rc=$?" >> /tmp/o/asan-build.log) &
asan_pid=$!
g++ -std=c++20 -O2 -g -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/loop_probe || exit 1
export KILN_CACHE_DIR=/tmp/kc28
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu)
for c in lstm1 gru1; do /tmp/loop_probe $c 3000 E > /dev/null 2>&1; done
for i in 1 2 3; do
  for c in lstm1 gru1; do
    timeout 120 $NCU --launch-skip 2500 --launch-count 1 -k regex:kiln_ --section SpeedOfLight \
      --cache-control none --clock-control none \
      gdb -q -batch -ex run -ex "thread apply all bt 12" --args /tmp/loop_probe $c 3000 E > /tmp/o/ncu-gdb-$c-$i.log 2>&1
    echo "ncu+gdb $c $i rc=$? $(grep -cE 'SIGSEGV|SIGABRT|received signal' /tmp/o/ncu-gdb-$c-$i.log) signal lines"
  done
done
wait $asan_pid; tail -2 /tmp/o/asan-build.log; echo "asan built $(( $(date +%s) - t0 )) s"
g++ -std=c++20 -O1 -g -fsanitize=address -fno-omit-frame-pointer -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-asan-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-asan-gpu -lkiln -Wl,-rpath,$PWD/build-asan-gpu -o /tmp/loop_probe_asan || exit 1
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
for c in lstm1 gru1 seed64; do
  timeout 120 /tmp/loop_probe_asan $c 20000 ENEN > /tmp/o/asan-$c.log 2>&1; echo "asan $c rc=$? $(grep -c ERROR /tmp/o/asan-$c.log) errors"
done
for c in lstm1 gru1; do
  timeout 150 $NCU --launch-skip 2500 --launch-count 1 -k regex:kiln_ --section SpeedOfLight \
    --cache-control none --clock-control none /tmp/loop_probe_asan $c 3000 E > /tmp/o/asan-ncu-$c.log 2>&1
  echo "asan+ncu $c rc=$? $(grep -c ERROR /tmp/o/asan-ncu-$c.log) errors"
done
tar czf $OUT/s28f.tgz -C /tmp/o .
echo "total $(( $(date +%s) - t0 )) s"
