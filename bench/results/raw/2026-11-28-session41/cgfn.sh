#!/bin/bash
# per-function steady-state exclusive instructions a step (diff of two run lengths)
cell=$1; n1=${N1:-2000}; n2=${N2:-6000}
for n in $n1 $n2; do
  f=/tmp/cgf.$cell.$n.out
  KILN_LOOP_TEMPLATE=1 KILN_SMALL_MATMUL=all KILN_DEVICE=cpu valgrind --tool=callgrind --callgrind-out-file=$f /tmp/loop_probe $cell $n b > /dev/null 2>&1
  callgrind_annotate --threshold=100 --auto=no $f 2>/dev/null | grep -E "^ *[0-9,]+ " | sed 's/,//g' | sed -E 's/^ *([0-9]+) +\( *[0-9.]+%\) +/\1\t/' > $f.fn
done
python3 - "$cell" $n1 $n2 <<'PY'
import sys
cell,n1,n2=sys.argv[1],int(sys.argv[2]),int(sys.argv[3])
def load(n):
  d={}
  for l in open(f"/tmp/cgf.{cell}.{n}.out.fn"):
    c,name=l.rstrip("\n").split("\t",1); d[name.strip()]=d.get(name.strip(),0)+int(c)
  return d
a,b=load(n1),load(n2)
rows=sorted(((b.get(k,0)-a.get(k,0))/(n2-n1),k) for k in set(a)|set(b))
rows.reverse()
tot=sum(r[0] for r in rows)
print(f"total {tot:.0f}")
for v,k in rows[:45]: print(f"{v:8.1f}  {k[:150]}")
PY
