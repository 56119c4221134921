#!/bin/bash
# host instructions per training step's recording (forward + grad, nothing computed), train_rnn --record-only
m=${1:-lstm1}
for n in 10 30; do KILN_DEVICE=cpu valgrind --tool=callgrind --callgrind-out-file=/tmp/cgt.$m.$n${TAG:-}.out /tmp/build-prof/bench/train_rnn --device cpu --record-only $n --only $m > /dev/null 2>/tmp/cgt.$m.$n.err; done
a=$(grep "refs" /tmp/cgt.$m.10.err | awk '{gsub(",","",$4); print $4}'); b=$(grep "refs" /tmp/cgt.$m.30.err | awk '{gsub(",","",$4); print $4}')
echo "$m recording instrs/step $(( (b-a)/20 ))"
