#!/usr/bin/env bash
# A/B of NVRTC --Ofast-compile levels: kernel speed (fusion, chain) and compile cost.
cd "$(dirname "$0")/.." 2>/dev/null || true
scripts/gpu-check build || exit 1
for l in 0 min mid; do
  d=$(mktemp -d); KILN_NVRTC_FAST_COMPILE=$l KILN_CACHE_DIR=$d build-gpu/bench/fusion_gpu > $OUT/fusion-$l.md 2>&1
  KILN_NVRTC_FAST_COMPILE=$l KILN_CACHE_DIR=$d build-gpu/bench/chain_gpu > $OUT/chain-$l.md 2>&1
  python3 - "$d" "$OUT/sass-$l.txt" <<'PY'
import glob, os, subprocess, sys
rows = []
for f in sorted(glob.glob(sys.argv[1] + '/*.kce')):
    b = open(f, 'rb').read(); pos = 0; sz = {}; name = ''
    while True:
        e = b.index(b'\n', pos); line = b[pos:e].decode(); pos = e + 1
        k, _, v = line.partition(' ')
        if k == 'name': name = v
        if k in ('key', 'source', 'log', 'binary'): sz[k] = int(v.split()[0])
        if k == 'header': break
    off = pos + sz['key'] + sz['source'] + sz['log']
    open('/tmp/k.cubin', 'wb').write(b[off:off + sz['binary']])
    sass = subprocess.run(['cuobjdump', '-sass', '/tmp/k.cubin'], capture_output=True, text=True).stdout
    n = sum(1 for l in sass.splitlines() if l.strip().startswith('/*') and '*/' in l and l.strip()[2:6].isalnum() and ';' in l)
    rows.append(f'{name.rsplit("_", 1)[0][:60]} {n}')
open(sys.argv[2], 'w').write('\n'.join(sorted(rows)) + '\n')
PY
  rm -rf $d
done
sleep 20
for rep in 1 2; do for l in 0 min mid; do
  d=$(mktemp -d); KILN_NVRTC_FAST_COMPILE=$l KILN_CACHE_DIR=$d build-gpu/bench/compile_gpu > $OUT/compile-$l-$rep.md 2>&1; rm -rf $d
done; done
for l in 0 min mid; do echo "== $l"; grep -E '^\|' $OUT/fusion-$l.md | cut -c1-140; grep -E 'GB/s|us' $OUT/chain-$l.md | head -12; done
paste $OUT/sass-0.txt $OUT/sass-mid.txt | head -40
for f in $OUT/compile-*.md; do echo "== $f"; grep -E '^\|' $f | head -12; done
