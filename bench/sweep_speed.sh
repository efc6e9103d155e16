#!/usr/bin/env bash
# Sweep overhead and parallel speed-up (docs/PERFORMANCE.md): a 64-point sweep on the tiny chip
# with --jobs 1 and --jobs 2. Per-point overhead = (sweep wall time - the points' own
# simulation time, `measured.sim_wall_seconds`) / points: process start, SystemC elaboration,
# config loading, writing the run directory and the result line.
# Usage: bench/sweep_speed.sh [build/bin/wallsim]
set -euo pipefail
cd "$(dirname "$0")/.."
wallsim=${1:-build/bin/wallsim}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/spec.json" <<'SPEC'
{"base_config": "configs/tiny.json",
 "axes": {"timing.hbm.bandwidth_gb_per_s": [10, 20, 30, 40, 50, 60, 70, 80],
          "timing.dma.bandwidth_gb_per_s": [5, 10, 15, 20, 25, 30, 35, 40]},
 "workloads": ["mlp:batch=1024,d_model=256,d_ff=1024,layers=2"], "modes": ["native"], "steps": 30}
SPEC
for jobs in 1 2; do
  start=$(date +%s.%N)
  "$wallsim" sweep "$tmp/spec.json" --jobs "$jobs" --out "$tmp/j$jobs" 2>/dev/null
  end=$(date +%s.%N)
  sim=$(/usr/bin/python3 -c "
import json, glob
print(sum(json.load(open(p))['measured']['sim_wall_seconds'] for p in glob.glob('$tmp/j$jobs/points/*/stats.json')))")
  echo "jobs=$jobs wall=$(echo "$end - $start" | bc) s sim=$sim s"
  eval "wall$jobs=$(echo "$end - $start" | bc)"
  eval "sim$jobs=$sim"
done
echo "per-point overhead (jobs=1): $(echo "($wall1 - $sim1) / 64 * 1000" | bc -l | cut -c 1-6) ms"
echo "speed-up jobs=2 over jobs=1: $(echo "$wall1 / $wall2" | bc -l | cut -c 1-5)x"
