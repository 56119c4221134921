#!/usr/bin/env bash
# Prepared in session 33, not run (the device time was spent): the shared loop constants
# (EngineState::loop_shares_constants, efa598b) timed on the H100, A/B in one process by
# tools/host-probe/loop_forms.cpp (form "no eval, own constants"), 3 processes; then rnn_gpu's
# issue-20 targets once. Run `scripts/gpu-check suite` in the next call on the warm machine:
# the GPU suite has not run on efa598b.
set -uo pipefail
t0=$(date +%s)
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B build-gpu "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DKILN_LLVM_ROOT="$PWD/.deps/llvm" > /tmp/cfg.log 2>&1 || { tail -20 /tmp/cfg.log; exit 1; }
cmake --build build-gpu -j16 > /tmp/b.log 2>&1 || { grep -E "error" /tmp/b.log | head; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_forms.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/loop_forms || exit 1
KILN_COMPILE=sync /tmp/loop_forms 300 > /dev/null 2>&1
for p in 1 2 3; do echo "== process $p"; timeout 90 /tmp/loop_forms 2000; done 2>&1 | tee $OUT/forms.txt
timeout 150 build-gpu/bench/rnn_gpu 5000 3 > $OUT/bench-rnn_gpu.md 2>&1; echo "rnn_gpu rc=$?"
grep -E "^target|^ERROR" $OUT/bench-rnn_gpu.md
echo "total $(( $(date +%s) - t0 )) s"
