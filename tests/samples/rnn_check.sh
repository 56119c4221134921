#!/usr/bin/env bash
# The RNN sample's training curve on the CPU (KILN_DEVICE=cpu), three ways that must agree to
# the bit: its compiled step (the default), every step recorded (--no-compile), and a run
# stopped at a log row and resumed from its checkpoint. Compares the losses of loss.csv (step,
# train and validation loss; not the elapsed time).
#   tests/samples/rnn_check.sh PATH/TO/kiln-rnn
set -euo pipefail
rnn=${1:?kiln-rnn}
dir=$(mktemp -d /tmp/kiln-rnn-check.XXXXXX)
trap 'rm -rf "$dir"' EXIT
flags=(--device cpu --hidden 16 --batch 4 --window 8 --log-every 4 --val-every 8
       --checkpoint-every 4)
"$rnn" "${flags[@]}" --steps 12 --out "$dir/compiled" >/dev/null
"$rnn" "${flags[@]}" --steps 12 --out "$dir/recorded" --no-compile >/dev/null
"$rnn" "${flags[@]}" --steps 8 --out "$dir/resumed" >/dev/null
"$rnn" "${flags[@]}" --steps 12 --out "$dir/resumed" --resume >/dev/null
losses() { cut -d, -f1-3 "$1/loss.csv"; }
status=0
for other in recorded resumed; do
  if ! diff <(losses "$dir/compiled") <(losses "$dir/$other") >/dev/null; then
    echo "rnn_check: the $other run's losses differ from the compiled run's:"
    diff <(losses "$dir/compiled") <(losses "$dir/$other") || true
    status=1
  fi
done
[[ $(losses "$dir/compiled" | wc -l) -ge 4 ]] || { echo "rnn_check: too few loss rows"; status=1; }
[[ $status == 0 ]] && echo "rnn_check: compiled, recorded and resumed runs agree"
exit $status
