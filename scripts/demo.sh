#!/usr/bin/env bash
# The main job on the built-in default. For now: the trn2 chip and the example plans, checked
# and disassembled. Usage: scripts/demo.sh path/to/wallsim
set -euo pipefail
wallsim=${1:-build/bin/wallsim}
cd "$(dirname "$0")/.."

echo "== the chip: configs/trn2.json, resolved =="
"$wallsim" config summary --config configs/trn2.json
echo
for plan in examples/plans/*.json; do
  echo "== $plan =="
  "$wallsim" plan check "$plan" --config configs/trn2.json
  "$wallsim" plan disasm "$plan"
  echo
done
