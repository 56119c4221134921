#!/usr/bin/env bash
# Session 31 call 8: the loop flush's node bound (64/128/256) alternated in one process for the
# seed loop (d=64), LSTM and GRU at batch 1, beside an eval every step; two processes. Then the
# engine's flush, plan and loop tests on CUDA at this commit.
set -uo pipefail
t0=$(date +%s)
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B build-gpu "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DKILN_LLVM_ROOT="$PWD/.deps/llvm" > /tmp/cfg.log 2>&1 || { tail -20 /tmp/cfg.log; exit 1; }
cmake --build build-gpu -j16 --target kiln kiln_tests > /tmp/b.log 2>&1 || { grep -E "error" /tmp/b.log | head; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench -Ibuild-gpu/generated/include -I.deps/llvm/include scripts/tmp/flush_size_probe.cpp -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/fsp || exit 1
KILN_COMPILE=sync /tmp/fsp 300 > /dev/null 2>&1 # compile every kernel once (disk cache)
for p in 1 2; do timeout 60 /tmp/fsp 3000 2>&1 | tee $OUT/fsp$p.txt; echo "process $p $(( $(date +%s) - t0 )) s"; done
KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 KILN_COMPILE=sync timeout 200 build-gpu/tests/kiln_tests --gtest_brief=1 \
  --gtest_filter='Adaptive*:Lazy*:PlanCache*:Reproducible*:MergedLaunch*:Standin*:Loop*:Held*:Codegen.*' > $OUT/tests.txt 2>&1
echo "tests rc=$? $(( $(date +%s) - t0 )) s"; tail -4 $OUT/tests.txt
