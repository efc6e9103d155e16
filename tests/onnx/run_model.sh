#!/usr/bin/env bash
# docs/MODELS.md's three commands for one model: import it with its weights, then run the graph
# workload functionally under every execution mode. Usage: run_model.sh WALLSIM MODEL CONFIG
set -euo pipefail
bin=$1
model=$2
config=$3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$bin" import onnx "$model" --out "$T/g.json" --weights
for mode in native eager eager-debug fused aot; do
  "$bin" run -c "$config" --workload "graph:file=$T/g.json" --mode "$mode" --functional \
    --out "$T/run_$mode"
  test -s "$T/run_$mode/stats.json"
done
