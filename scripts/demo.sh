#!/usr/bin/env bash
# The main job on the built-in default: the trn2 chip running the example plans, with real values
# (functional mode), writing a run directory per plan under out/demo/.
# Usage: scripts/demo.sh path/to/wallsim
set -euo pipefail
wallsim=${1:-build/bin/wallsim}
cd "$(dirname "$0")/.."
config=configs/trn2.json

echo "== the chip: $config =="
"$wallsim" config summary --config "$config"
echo
echo "== a plan, disassembled: examples/plans/matmul.json =="
"$wallsim" plan check examples/plans/matmul.json --config "$config"
"$wallsim" plan disasm examples/plans/matmul.json
echo
for plan in examples/plans/*.json; do
  name=$(basename "$plan" .json)
  echo "== exec $plan (functional) =="
  "$wallsim" exec "$plan" --config "$config" --functional --out "out/demo/$name"
  grep -E '^device\.(cycles|time_ns|engines\.(tensor|vector|scalar)\.utilization|hbm\.(read|write)_bytes) ' \
    "out/demo/$name/stats.txt"
  echo
done
echo "== compile examples/graphs/mlp.json: fused (one plan) vs one plan per op =="
for group in all per-op; do
  "$wallsim" compile examples/graphs/mlp.json --config "$config" --group "$group" \
    --out "out/demo/mlp_$group.plan.json"
  "$wallsim" exec "out/demo/mlp_$group.plan.json" --config "$config" --out "out/demo/mlp_$group"
  grep -E '^device\.(time_ns|hbm\.(read|write)_bytes) ' "out/demo/mlp_$group/stats.txt"
done
echo
echo "Open out/demo/<run>/trace.json in https://ui.perfetto.dev or chrome://tracing."
