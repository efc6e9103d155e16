#!/usr/bin/env bash
# Runs every Google Benchmark program in BUILD/bin (named *_bench). Usage: scripts/bench.sh BUILD
set -euo pipefail
build=${1:-build}
for b in "$build"/bin/*_bench; do
  [[ -x "$b" ]] || continue
  echo "== $(basename "$b") =="
  "$b" --benchmark_min_time=0.2 "${@:2}"
done
