#!/usr/bin/env bash
# A first run on an empty kernel cache, as a new user has it: each command runs in a fresh
# process with a fresh KILN_CACHE_DIR, once per setting (VAR=VALUE, or `default`), alternating,
# and its wall time is printed with the compiles it did (from the cache directory's entry count).
#   bench/cuda/cold_start.sh BUILD_DIR [settings...]
#   (default settings: KILN_COMPILE_PROCESSES=0, compiling in the process, and the default)
set -uo pipefail
build=${1:?build dir}
shift
settings=("$@")
[[ ${#settings[@]} -eq 0 ]] && settings=(KILN_COMPILE_PROCESSES=0 default)
cmds=(
  "$build/bench/train_rnn --device cuda --only lstm1 --steps 1 --reps 1"
  "$build/samples/kiln-rnn --device cuda --steps 50 --log-every 50 --val-every 50 --checkpoint-every 1000000 --out /tmp/kiln-cold-sample"
)
echo "| command | setting | wall s | kernels compiled |"
echo "|---|---|---:|---:|"
for round in 1 2; do
  for c in "${cmds[@]}"; do
    for t in "${settings[@]}"; do
      dir=$(mktemp -d /tmp/kiln-cold-XXXXXX)
      env_t=(); [[ $t != default ]] && env_t=("$t")
      t0=$(date +%s.%N)
      env "${env_t[@]}" KILN_CACHE_DIR="$dir" $c >/dev/null 2>&1 || echo "failed: $c" >&2
      t1=$(date +%s.%N)
      n=$(find "$dir" -name '*.kce' | wc -l)
      printf '| `%s` | %s | %.2f | %d |\n' "${c#$build/}" "$t" "$(awk "BEGIN { print $t1 - $t0 }")" "$n"
      rm -rf "$dir" /tmp/kiln-cold-sample
    done
  done
done
