#!/usr/bin/env bash
# The bad-input corpus (issue 20): every case in cases.txt must make wallsim exit with code 2,
# print exactly one line on standard error containing the expected text, and leave no output
# directory or staging directory behind; the FIFO $T/fifo a case may name as an output must still
# be a FIFO afterwards.
# Usage: run_corpus.sh WALLSIM_BIN SOURCE_DIR [NAME_REGEX]
set -u
bin=$1
src=$2
filter=${3:-.}
here="$src/tests/bad_input"
D="$here/files"
C=configs/tiny.json
cd "$src" || exit 1
fail=0
count=0
while IFS=$'\t' read -r name expected args; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  [[ "$name" =~ $filter ]] || continue
  count=$((count + 1))
  T=$(mktemp -d)
  mkfifo "$T/fifo"
  env_prefix=()
  case "$name" in
    sweep.slurm_letters) env_prefix=(env SLURM_ARRAY_TASK_ID=abc) ;;
    sweep.slurm_suffix) env_prefix=(env SLURM_ARRAY_TASK_ID=2x) ;;
    sweep.slurm_negative) env_prefix=(env SLURM_ARRAY_TASK_ID=-3) ;;
  esac
  # timeout: a hang (a FIFO opened for reading) is a failure, not a stuck suite.
  eval "timeout 60 ${env_prefix[*]} \"$bin\" $args" >"$T/stdout" 2>"$T/stderr"
  code=$?
  # Under AddressSanitizer an exception thrown on the simulation's host thread (a coroutine
  # stack) makes ASan print a three-line warning first (google/sanitizers#189): not wallsim's.
  sed -i -e '/WARNING: ASan is ignoring requested __asan_handle_no_return/d' \
    -e '/^False positive error reports may follow$/d' \
    -e '/^For details see https:\/\/github.com\/google\/sanitizers\/issues\/189$/d' "$T/stderr"
  err=$(cat "$T/stderr")
  lines=$(grep -c '' "$T/stderr")
  problem=""
  if [[ $code -ne 2 ]]; then
    problem="exit code $code, not 2"
  elif [[ $lines -ne 1 ]]; then
    problem="$lines lines on stderr, not 1"
  elif [[ "$err" != *"$expected"* ]]; then
    problem="the message does not contain '$expected'"
  elif [[ ! -p "$T/fifo" ]]; then
    problem="the FIFO $T/fifo was replaced"
  else
    left=$(find "$T" -mindepth 1 -not -name fifo -not -name stdout -not -name stderr | head -3)
    [[ -n "$left" ]] && problem="left behind: $left"
    partial=$(find "$src" -maxdepth 2 -name '.*.partial-*' 2>/dev/null | head -1)
    [[ -n "$partial" ]] && problem="left a staging directory: $partial"
  fi
  if [[ -n "$problem" ]]; then
    echo "FAIL $name: $problem"
    echo "     wallsim $args"
    echo "     stderr: ${err:0:400}"
    fail=$((fail + 1))
  fi
  rm -rf "$T"
done <"$here/cases.txt"
echo "bad-input corpus: $count cases, $fail failed"
[[ $count -gt 0 && $fail -eq 0 ]]
