#!/usr/bin/env bash
# Session 33, call 3: where a loop step's host time goes on the H100 (recording against the
# flushing steps, loop_no_eval's split), and the loop forms (loop_forms) after the record-path
# trims (set_contiguous, attribute-free kind hash, inline grad checks).
set -uo pipefail
t0=$(date +%s)
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B build-gpu "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DKILN_LLVM_ROOT="$PWD/.deps/llvm" > /tmp/cfg.log 2>&1 || { tail -20 /tmp/cfg.log; exit 1; }
cmake --build build-gpu -j16 --target kiln > /tmp/b.log 2>&1 || { grep -E "error" /tmp/b.log | head; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
for p in loop_forms loop_no_eval; do
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/$p.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/$p || exit 1
done
KILN_COMPILE=sync /tmp/loop_forms 300 > /dev/null 2>&1
for p in 1 2 3; do
  echo "== process $p"
  for c in seed64 lstm1 gru1; do PROBE_STATS=1 timeout 60 /tmp/loop_no_eval $c 3000 ENEN; done
done 2>&1 | grep -v "=== timed" | tee $OUT/split.txt
for p in 1 2 3; do echo "== process $p"; timeout 90 /tmp/loop_forms 2000; done 2>&1 | tee $OUT/forms.txt
echo "total $(( $(date +%s) - t0 )) s"
