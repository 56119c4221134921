#!/usr/bin/env bash
# A first run on an empty kernel cache, as a new user has it: each command runs in a fresh
# process with a fresh KILN_CACHE_DIR, once per setting (VAR=VALUE, or `default`), alternating,
# and its wall time is printed with the compiles it did (from the cache directory's entry count).
# Then the seeds' loop's first steps (bench/cuda/first_steps.cpp) beside PyTorch eager.
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

# The seeds' loop's first steps after the device is initialised (issue 19's cold-start figures),
# kiln on an empty cache with the stand-in (KILN_COMPILE=background, the default) and without
# (sync), and PyTorch eager, each in a fresh process, alternating.
if [[ -x $build/bench/first_steps ]]; then
  declare -A kiln_rows=()
  torch_rows=() kiln_head='' torch_head=''
  have_torch=0
  python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null && have_torch=1
  for round in 1 2 3; do
    for mode in background sync; do
      dir=$(mktemp -d /tmp/kiln-cold-XXXXXX)
      out=$(KILN_COMPILE=$mode KILN_CACHE_DIR="$dir" "$build/bench/first_steps")
      rm -rf "$dir"
      kiln_head=$(grep -E '^\| (d|---)' <<<"$out")
      kiln_rows[$mode]+="$(grep -E '^\| [0-9]' <<<"$out")"$'\n'
    done
    if [[ $have_torch == 1 ]]; then
      out=$(python3 "$(dirname "$0")/../torch/first_steps_torch.py")
      torch_head=$(grep -E '^\| (d|---)' <<<"$out")
      torch_rows+=("$(grep -E '^\| [0-9]' <<<"$out")")
    fi
  done
  for mode in background sync; do
    printf '\nkiln, KILN_COMPILE=%s, empty cache, 3 fresh processes:\n\n%s\n' "$mode" "$kiln_head"
    printf '%s' "${kiln_rows[$mode]}"
  done
  if [[ $have_torch == 1 ]]; then
    printf '\nPyTorch eager, 3 fresh processes:\n\n%s\n' "$torch_head"
    printf '%s\n' "${torch_rows[@]}"
  fi
  # The warm-disk case: a cache directory that one run filled, then 3 fresh processes on it.
  for mode in background sync; do
    dir=$(mktemp -d /tmp/kiln-cold-XXXXXX)
    KILN_COMPILE=$mode KILN_CACHE_DIR="$dir" "$build/bench/first_steps" >/dev/null
    printf '\nkiln, KILN_COMPILE=%s, warm disk cache, 3 fresh processes:\n\n%s\n' "$mode" "$kiln_head"
    for round in 1 2 3; do
      KILN_COMPILE=$mode KILN_CACHE_DIR="$dir" "$build/bench/first_steps" | grep -E '^\| [0-9]'
    done
    rm -rf "$dir"
  done
fi

# The RNN sample's first training steps (issue 19: "the first training step of samples/rnn"),
# elapsed seconds of its loss.csv (from the trainer's start, after the device and the model are
# set up), each on an empty cache in a fresh process, alternating: the default (kiln's kernels
# while cuBLAS sets up on a thread), KILN_CUBLAS=wait (the first GEMM waits for cuBLAS's set-up)
# and KILN_CUBLAS=0 (no cuBLAS); then PyTorch's first training steps of the same model.
sample_device=${SAMPLE_DEVICE:-cuda}
if [[ -x $build/samples/kiln-rnn ]]; then
  printf '\nkiln-rnn, first 30 training steps on an empty cache (s from the trainer'"'"'s start):\n\n'
  printf '| setting | step 1 | step 2 | step 3 | step 4 | step 5 | step 10 | step 20 | step 30 |\n'
  printf '|---|---:|---:|---:|---:|---:|---:|---:|---:|\n'
  for round in 1 2 3; do
    for t in default KILN_CUBLAS=wait KILN_CUBLAS=0; do
      dir=$(mktemp -d /tmp/kiln-cold-XXXXXX)
      env_t=(X=1); [[ $t != default ]] && env_t=("$t")
      env "${env_t[@]}" KILN_CACHE_DIR="$dir" "$build/samples/kiln-rnn" --device "$sample_device" \
        --steps 30 --log-every 1 --val-every 100000 --checkpoint-every 1000000 \
        --out "$dir/out" >/dev/null 2>&1 || echo "failed: kiln-rnn ($t)" >&2
      printf '| %s | %s |\n' "$t" "$(awk -F, 'NR > 1 && (NR <= 6 || NR == 11 || NR == 21 || NR == 31) { print $4 }' "$dir/out/loss.csv" | paste -sd'|' | sed 's/|/ | /g')"
      rm -rf "$dir"
    done
  done
  if [[ ${have_torch:-0} == 1 ]]; then
    printf '\nPyTorch, first training steps of the same model, 3 fresh processes each:\n\n'
    printf '| mode | device init ms | set-up ms | first step ms | first 5 steps ms | 5th step ms |\n|---|---:|---:|---:|---:|---:|\n'
    for mode in lstmcell cudnn; do
      for round in 1 2 3; do
        python3 "$(dirname "$0")/../torch/first_train_step_torch.py" "$mode" | grep -E '^\| PyTorch'
      done
    done
  fi
fi
