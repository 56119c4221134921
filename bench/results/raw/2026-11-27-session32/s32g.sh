#!/usr/bin/env bash
# Session 32 call 7: where the sample hangs after its training with kiln's own GEMMs (bounds.diff
# applied in this tree): the threads' stacks (SIGUSR2 -> backtrace), their CPU, the workers'.
set -uo pipefail
t0=$(date +%s)
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B build-gpu "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DKILN_LLVM_ROOT="$PWD/.deps/llvm" > /tmp/cfg.log 2>&1 || { tail -20 /tmp/cfg.log; exit 1; }
cmake --build build-gpu -j16 --target kiln kiln-rnn kiln-cache > /tmp/b.log 2>&1 || { grep -E "error" /tmp/b.log | head; exit 1; }
echo "built $(( $(date +%s) - t0 )) s"
g++ -O2 -shared -fPIC -o /tmp/libstackdump.so scripts/tmp/stackdump.cpp || exit 1
for i in 1 2; do
  dir=$(mktemp -d /tmp/kiln-fs-XXXXXX); out=/tmp/o-own$i; rm -rf $out
  LD_PRELOAD=/tmp/libstackdump.so PROBE_TILE_LOG2=28 PROBE_DOT_MAX_K=4096 KILN_CACHE_DIR=$dir build-gpu/samples/kiln-rnn --device cuda --steps 30 --log-every 1 \
    --val-every 100000 --checkpoint-every 1000000 --out $out > $out.log 2>$out.err &
  pid=$!
  for s in $(seq 1 25); do sleep 1; kill -0 $pid 2>/dev/null || break; done
  if kill -0 $pid 2>/dev/null; then
    echo "run $i: still running after 25 s; last log line: $(tail -1 $out.log)"
    ps -eLo pid,tid,stat,pcpu,comm | awk -v p=$pid '$1==p && $4 > 5'
    ps -eo pid,ppid,stat,pcpu,etime,args | grep -E "serve-compiles" | grep -v grep | head
    cat /proc/$pid/maps > /tmp/maps$i
    for tid in $(ls /proc/$pid/task); do
      python3 -c "import ctypes,sys; ctypes.CDLL(None).syscall(234, $pid, $tid, 12)"; sleep 0.2
    done
    sleep 1; kill -9 $pid
    python3 - $out.err /tmp/maps$i <<'PY'
import sys, re, subprocess
err, maps = open(sys.argv[1]).read(), open(sys.argv[2]).read().splitlines()
segs = []
for l in maps:
    p = l.split()
    if len(p) >= 6 and 'x' in p[1]:
        lo, hi = (int(x, 16) for x in p[0].split('-')); segs.append((lo, hi, int(p[2], 16), p[5]))
for block in err.split('--- tid ')[1:]:
    lines = block.strip().splitlines()
    print('--- tid', lines[0])
    for l in lines[1:20]:
        m = re.search(r'\[0x([0-9a-f]+)\]', l)
        if not m: print('  ', l); continue
        a = int(m.group(1), 16)
        seg = next((s for s in segs if s[0] <= a < s[1]), None)
        if not seg or not seg[3].endswith(('.so', '.so.0', 'kiln-rnn')) and 'libkiln' not in seg[3] and 'kiln-rnn' not in seg[3]:
            print('  ', l[:150]); continue
        off = a - seg[0] + seg[2]
        fn = subprocess.run(['addr2line', '-f', '-C', '-e', seg[3], hex(off - 1)], capture_output=True, text=True).stdout.split('\n')[0]
        print('  ', seg[3].split('/')[-1], fn[:160])
PY
  else
    wait $pid; echo "run $i: finished rc $?: $(tail -3 $out.log | tr '\n' ' ')"
  fi
  rm -rf $dir
done 2>&1 | tee $OUT/hang-stacks.txt
echo "total $(( $(date +%s) - t0 )) s"
