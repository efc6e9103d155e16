#!/usr/bin/env bash
# The main job on the built-in default: `wallsim study wall` on the trn2 chip — a GPT-2-small
# inference step and a decode loop under native, strict-eager, fused-eager and AOT execution,
# with both compile-cost profiles — writing its table and one trace per mode to out/wall/.
# Usage: scripts/demo.sh path/to/wallsim
set -euo pipefail
wallsim=${1:-build/bin/wallsim}
cd "$(dirname "$0")/.."
config=configs/trn2.json

echo "== the chip: $config =="
"$wallsim" config summary --config "$config"
echo
echo "== the compilation wall: configs/studies/wall.json =="
"$wallsim" study wall --config "$config" --spec configs/studies/wall.json --out out/wall
echo
echo "Open out/wall/runs/<workload>_neuron_<mode>/trace.json in https://ui.perfetto.dev or"
echo "chrome://tracing; the table is out/wall/wall.md (and wall.csv)."
