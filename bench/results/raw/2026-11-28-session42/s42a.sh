#!/usr/bin/env bash
# Session 42 call 1 (prepared in session 41): choose the elementwise grid, then issue 20's whole
# benchmark set in one run. (1) The lab (both kernels, capped and full grids, 1/2/4 vectors a
# thread); (2) the GPU tests of the grouped variants' bits; (3) chain_gpu and fusion_gpu under
# each KILN_ELEMENTWISE_GRID, alternated twice; (4) `gpu-check natural` (rnn_gpu with its
# 100,000-step memory check and eager-bits check, chain, fusion, transfers, PyTorch) with the
# grid that served the chain and the broadcast best (the worse of the two, medians over rounds).
set -uo pipefail
t0=$(date +%s)
OUT=$OUT scripts/gpu-check build > $OUT/b.txt 2>&1 || { tail $OUT/b.txt; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
nvcc -O3 -std=c++17 -arch=sm_90 --fmad=false -o /tmp/chain_lab tools/elementwise-lab/chain_lab.cu > /dev/null 2>&1
/tmp/chain_lab 30 > $OUT/chain_lab.md 2>&1; cat $OUT/chain_lab.md
KILN_TEST_DEVICE=cuda KILN_POISON_ALLOCATIONS=1 KILN_COMPILE=sync build-gpu/tests/kiln_tests \
  --gtest_filter='GpuVsCpu.ElementwiseVectorGroups*:GpuVsCpu.ElementwiseChains*:GpuVsCpu.Broadcast*' --gtest_brief=1 2>&1 | tail -3
for r in 1 2; do
  for g in capped 1 2 4; do
    for b in chain_gpu fusion_gpu; do
      KILN_ELEMENTWISE_GRID=$g timeout 90 build-gpu/bench/$b > $OUT/$b-$g-$r.md 2>&1 || echo "$b $g rc $?"
    done
  done
done
python3 - "$OUT" > $OUT/grid-choice.md <<'PY'
import re, sys, statistics, glob
out = sys.argv[1]
rows = {}
for f in glob.glob(f"{out}/chain_gpu-*-*.md") + glob.glob(f"{out}/fusion_gpu-*-*.md"):
    g = f.rsplit("-", 2)[1]
    for line in open(f):
        c = [x.strip() for x in line.split("|")]
        if len(c) > 8 and c[-2].endswith("%"):
            rows.setdefault((c[1], g), []).append(int(c[-2][:-1]))
grids = ["capped", "1", "2", "4"]
cases = sorted({k[0] for k in rows})
print("| case | " + " | ".join(grids) + " |")
print("|---|" + "---:|" * len(grids))
for c in cases:
    print(f"| {c} | " + " | ".join(str(statistics.median(rows.get((c, g), [0]))) + "%" for g in grids) + " |")
def score(g):
    key = [c for c in cases if c.startswith("9-op chain f32, named") or c.startswith("broadcast")]
    return min(statistics.median(rows.get((c, g), [0])) for c in key)
best = max(grids, key=score)
print(f"\nchosen: {best} (the worse of the named chain f32 and the broadcast: " +
      ", ".join(f"{g} {score(g)}%" for g in grids) + ")")
PY
cat $OUT/grid-choice.md
best=$(grep -oP 'chosen: \K\S+' $OUT/grid-choice.md)
cat $OUT/chain_gpu-*.md > $OUT/chain_gpu-all.md; cat $OUT/fusion_gpu-*-*.md > $OUT/fusion_gpu-all.md
rm -f $OUT/chain_gpu-[c124]*-[12].md $OUT/fusion_gpu-[c124]*-[12].md
echo "A/B done $(( $(date +%s) - t0 )) s; natural with KILN_ELEMENTWISE_GRID=$best"
mkdir -p $OUT/natural
KILN_ELEMENTWISE_GRID=$best OUT=$OUT/natural timeout $(( 590 - ($(date +%s) - t0) )) scripts/gpu-check natural > $OUT/natural.txt 2>&1
echo "natural rc $?"; cat $OUT/natural.txt | tail -30
# Issue 19 on this machine: a first run on an empty cache (the sample's first steps, the seeds'
# loop's first 5 steps beside PyTorch eager), if time is left.
if (( 590 - ($(date +%s) - t0) > 100 )); then
  timeout $(( 585 - ($(date +%s) - t0) )) bench/cuda/cold_start.sh build-gpu > $OUT/natural/cold-start.md 2>&1
  echo "cold start rc $?"; tail -25 $OUT/natural/cold-start.md
fi
rm -f $OUT/natural/build.log $OUT/natural/configure.log
for f in $OUT/natural/*; do echo "=== $(basename $f)"; cat "$f"; done > $OUT/natural-all.md
rm -rf $OUT/natural $OUT/b.txt $OUT/build.log $OUT/configure.log # the device returns ~8 files
echo "total $(( $(date +%s) - t0 )) s"
