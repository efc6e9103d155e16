#!/usr/bin/env bash
# Runs each libFuzzer harness of tests/fuzz for SECONDS, from its seeds (the project's files and
# the bad-input corpus), keeping what it finds in BUILD/fuzz-corpus/<name>/ and crashes in
# BUILD/fuzz-crashes/. Usage: scripts/fuzz.sh BUILD SECONDS [NAME...]   (`make fuzz` runs it)
# The long run the issue asks for: `make fuzz FUZZ_SECONDS=360` (5 harnesses x 6 min = 30 min).
set -euo pipefail
build=${1:?usage: fuzz.sh BUILD SECONDS [NAME...]}
seconds=${2:?usage: fuzz.sh BUILD SECONDS [NAME...]}
shift 2
names=("$@")
[[ ${#names[@]} -eq 0 ]] && names=(plan graph config npy workload_spec)
status=0
for n in "${names[@]}"; do
  corpus="$build/fuzz-corpus/$n"
  crashes="$build/fuzz-crashes/$n"
  mkdir -p "$corpus" "$crashes"
  seeds=()
  while IFS= read -r s; do [[ -n "$s" ]] && seeds+=("$s"); done <"$build/fuzz_seeds_$n.txt"
  # Seed files are merged into the corpus directory once (libFuzzer reads directories).
  for s in "${seeds[@]}"; do
    if [[ -d "$s" ]]; then cp -rn "$s"/. "$corpus"/ 2>/dev/null || true
    else cp -n "$s" "$corpus"/ 2>/dev/null || true; fi
  done
  echo "fuzz: $n for ${seconds}s" >&2
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$build/bin/${n}_fuzzer" "$corpus" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix="$crashes/" -print_final_stats=1 2>"$build/fuzz-$n.log" ||
    status=1
  grep -E "stat::number_of_executed_units|ERROR|SUMMARY" "$build/fuzz-$n.log" >&2 || true
done
exit $status
