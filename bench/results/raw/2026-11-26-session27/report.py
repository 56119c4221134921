#!/usr/bin/env python3
# Symbolizes the sampler's stacks (addr2line per module) and prints inclusive and self counts,
# counting only samples whose stack passes through FILTER (a substring of a function name).
import sys, subprocess, collections, bisect
path = sys.argv[1]; filt = sys.argv[2] if len(sys.argv) > 2 else ''
stacks, maps = [], []
for line in open(path):
    if line.startswith('S'):
        stacks.append([int(x, 16) for x in line.split()[1:]])
    elif line.startswith('M '):
        p = line[2:].split()
        if len(p) >= 6 and 'x' in p[1]:
            lo, hi = (int(x, 16) for x in p[0].split('-'))
            maps.append((lo, hi, int(p[2], 16), p[5]))
maps.sort()
starts = [m[0] for m in maps]
def where(a):
    i = bisect.bisect_right(starts, a) - 1
    if i < 0 or a >= maps[i][1]: return None
    lo, hi, off, f = maps[i]
    return f, a - lo + off
need = collections.defaultdict(set)
for s in stacks:
    for k, a in enumerate(s):
        w = where(a if k == 0 else a - 1)
        if w: need[w[0]].add(w[1])
names = {}
import os, sys as _sys
_sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elfsym import Elf
mangled = {}
for f, offs in need.items():
    base = f.split('/')[-1]
    try:
        e = Elf(f)
    except Exception as ex:
        e = None
    for o in offs:
        n = e.name(o) if e else None
        names[(f, o)] = n if n else '%s+%x' % (base, o)
        if n: mangled[n] = None
try:
    keys = list(mangled)
    out = subprocess.run(['c++filt'], input='\n'.join(keys), capture_output=True, text=True, timeout=120).stdout.split('\n')
    if len(out) >= len(keys):
        for k, v in zip(keys, out): mangled[k] = v
except Exception:
    pass
for k in names:
    names[k] = (mangled.get(names[k]) or names[k])[:150]
def name(a, k):
    w = where(a if k == 0 else a - 1)
    return names.get(w, '??') if w else '??'
incl, self_ = collections.Counter(), collections.Counter()
total = 0
for s in stacks:
    fr = [name(a, k) for k, a in enumerate(s)]
    if fr and 'on_signal' in fr[0]: fr = fr[2:]  # the handler and the signal trampoline
    if filt and not any(filt in x for x in fr): continue
    total += 1
    self_[fr[0] if fr else '??'] += 1
    for x in set(fr): incl[x] += 1
print('samples', len(stacks), 'matching', total)
print('== inclusive')
for n, c in incl.most_common(90): print('%5.1f%% %6d  %s' % (100.0 * c / max(total, 1), c, n))
print('== self')
for n, c in self_.most_common(45): print('%5.1f%% %6d  %s' % (100.0 * c / max(total, 1), c, n))
