#!/usr/bin/env bash
# Session 36, call 2: the seed loop's GPU time per step with merged launches (KILN_MERGE_LAUNCHES=1:
# a flush's 32 steps as one launch over the cluster barrier) against a kernel a step, CUPTI trace;
# then loop_forms (incl. <= 512 nodes) in processes alternating merging off/on, each with the
# host probe, to catch GPU-bound (fast-host) processes.
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/probe || exit 1
g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
  -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_forms.cpp \
  -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/loop_forms || exit 1
g++ -O2 -shared -fPIC bench/cupti/kernel_trace.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcupti -o /tmp/libkt.so || exit 1
echo "built $(( $(date +%s) - t0 )) s"
export KILN_COMPILE=sync
for m in 0 1; do
  KILN_MERGE_LAUNCHES=$m CUDA_INJECTION64_PATH=/tmp/libkt.so KERNEL_TRACE_OUT=/tmp/tr$m.csv PROBE_STATS=1 \
    timeout 90 /tmp/probe seed64 4000 N > /tmp/p$m.txt 2>&1
  echo "== merge $m: $(grep -E 'us/step' /tmp/p$m.txt | head -1 | cut -c1-90)"
  grep -iE "merged|launch" /tmp/p$m.txt | head -4
  # per step: the last 3000 steps' kernels (a merged kernel runs 32 steps)
  python3 - /tmp/tr$m.csv $m <<'PY'
import csv, sys
rows = sorted((int(r["start_ns"]), int(r["end_ns"]), r["name"]) for r in csv.DictReader(open(sys.argv[1])))
merged = sys.argv[2] == "1"
n = 2976 // 32 if merged else 2976
rows = rows[-n:]
steps = n * 32 if merged else n
busy, cs, ce = 0, rows[0][0], rows[0][1]
for s, e, _ in rows[1:]:
    if s > ce: busy += ce - cs; cs, ce = s, e
    else: ce = max(ce, e)
busy += ce - cs
span = rows[-1][1] - rows[0][0]
tot = sum(e - s for s, e, _ in rows)
names = {}
for s, e, nm in rows: names[nm[:50]] = names.get(nm[:50], 0) + 1
print(f"kernels {len(rows)} over {steps} steps; kernel time {tot/steps/1e3:.2f} us/step; busy {busy/steps/1e3:.2f}; span {span/steps/1e3:.2f}; mean kernel {tot/len(rows)/1e3:.2f} us; {names}")
PY
done | tee $OUT/merge-trace.txt
timeout 60 /tmp/loop_forms 300 seed > /dev/null 2>&1
for p in 1 2 3 4 5 6; do
  m=$(( p % 2 ))
  echo "== process $p merge $m"
  KILN_MERGE_LAUNCHES=$m timeout 90 /tmp/loop_forms 3000 seed 2>&1 | grep -E "probe|eval every step|no eval  |<= 512"
done | tee $OUT/forms.txt
echo "total $(( $(date +%s) - t0 )) s"
