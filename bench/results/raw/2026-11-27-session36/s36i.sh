#!/usr/bin/env bash
# Session 36, call 9: (1) rnn_gpu's LSTM and GRU batch-1 cases with KILN_EARLY_TRIGGER=1/0
# alternated (call 8's LSTM eval-every-step row took 20 us: the trigger, or the host?);
# (2) the trigger tests with each kernel's wait at its end: the sources in the cache, and the
# tests' full output.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
for r in 1 2; do for e in 1 0; do for c in "LSTM batch 1" "GRU batch 1"; do
  KILN_EARLY_TRIGGER=$e timeout 60 build-gpu/bench/rnn_gpu 3000 3 "$c" > /tmp/r.md 2>&1
  echo "round $r trigger $e $c: $(grep -E 'host speed probe:' /tmp/r.md | grep -oE '[0-9]+ us' | head -1) | $(grep -E "^\| $c \| kiln GPU lazy, CUDA graphs( \||, no eval in the loop \|)" /tmp/r.md | cut -d'|' -f3,5,6,10 | tr '\n' ';')"
done; done; done | tee $OUT/trigger-ab.txt
echo "== the trigger tests with the wait at each kernel's end"
python3 - <<'PY'
p = 'codegen/cuda_emit.cpp'
s = open(p).read()
old = '  line(1, "k_wait_for_predecessors();");\n'
assert s.count(old) == 1
s = s.replace(old, '')
tail = '  }\n  line(0, "}");\n  return std::move(s_);\n}\n'
s = s.replace(tail, '  }\n  line(1, "k_wait_for_predecessors(); // moved: the demonstration");\n  line(0, "}");\n  return std::move(s_);\n}\n', 1)
open(p, 'w').write(s)
PY
cmake --build build-gpu -j16 > /tmp/b2.log 2>&1 || tail -5 /tmp/b2.log
rm -rf /tmp/demo-cache
KILN_CACHE_DIR=/tmp/demo-cache build-gpu/tests/kiln_tests --gtest_filter='EarlyTrigger*' > /tmp/t.txt 2>&1; echo "tests rc $?"
grep -E "OK \]|FAILED \]|Failure|Which is|read |Expected|max_diff|ops recorded" /tmp/t.txt | cut -c1-300 | head -20
echo "sources with the moved wait in the cache: $(grep -rl 'moved: the demonstration' /tmp/demo-cache 2>/dev/null | wc -l) of $(find /tmp/demo-cache -type f | wc -l) files"
strings build-gpu/libkiln.so | grep -c "moved: the demonstration"
echo "total $(( $(date +%s) - t0 )) s"
