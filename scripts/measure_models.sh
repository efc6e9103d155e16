#!/usr/bin/env bash
# Captures the programs listed in docs/MODELS.md and replays each in every execution mode on
# trn2, timing-only, under /usr/bin/time. Prints one tab-separated row per replay:
#   program mode startup_ms steps_ms device_busy_ms compiles recompiles plans real_s user_s rss_mb load
# (load is the 1-minute load average when the replay ended). This is a benchmark, not a test:
# wall time depends on the machine and its load; the simulated columns are deterministic.
#
# usage: scripts/measure_models.sh [WALLSIM] [WORKDIR] [PROGRAM...]
#   PROGRAM is one of resnet18 mobilenet_v2 vit_b_16 gpt2_logits gpt2_generate gpt2_bounded
#   mlp_sgd mlp_adam transformer_sgd transformer_adam (default: all).
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
wallsim="${1:-$here/build/bin/wallsim}"
work="${2:-/tmp/wallsim-models}"
shift $(($# < 2 ? $# : 2))
programs=("$@")
if [ ${#programs[@]} -eq 0 ]; then
  programs=(resnet18 mobilenet_v2 vit_b_16 gpt2_logits gpt2_generate gpt2_bounded
            mlp_sgd mlp_adam transformer_sgd transformer_adam)
fi
mkdir -p "$work"
cd "$here"

# capture NAME [--meta] SCRIPT ARGS...: writes $work/NAME.json once.
capture() {
  local name="$1"; shift
  local meta=()
  if [ "$1" = "--meta" ]; then meta=(--meta); shift; fi
  local script="$1"; shift
  if [ ! -f "$work/$name.json" ]; then
    "$wallsim" capture "examples/torch/$script" --out "$work/$name.json" "${meta[@]}" -- "$@" \
      > /dev/null
  fi
}

# replay NAME FILE [EXTRA...]: one row per mode.
replay() {
  local name="$1" file="$2"; shift 2
  local mode out
  for mode in native eager fused aot; do
    out="$work/out-$name-$mode"
    rm -rf "$out"
    /usr/bin/time -o "$work/time.txt" -f "%e %U %M" \
      "$wallsim" run -c configs/trn2.json -w "program:file=$file" --mode "$mode" \
      --trace-level none --out "$out" "$@" > /dev/null 2>&1
    read -r real user rss < "$work/time.txt"
    load="$(cut -d' ' -f1 /proc/loadavg)"
    /usr/bin/python3 - "$out/stats.json" "$name" "$mode" "$real" "$user" "$rss" "$load" <<'EOF'
import json, sys
path, name, mode, real, user, rss, load = sys.argv[1:]
s = json.load(open(path))
st, tot = s["startup"], s["totals"]
steps_ms = sum(step["wall_ns"] for step in s["steps"]) / 1e6
print("\t".join([name, mode, f"{st['wall_ns'] / 1e6:.1f}", f"{steps_ms:.1f}",
                 f"{tot['device_busy_ns'] / 1e6:.2f}", str(tot["compiles"]),
                 str(tot["recompiles"]), str(tot["plans_launched"]), real, user,
                 str(int(rss) // 1024), load]))
EOF
  done
}

for p in "${programs[@]}"; do
  case "$p" in
    resnet18|mobilenet_v2|vit_b_16)
      capture "$p" --meta vision.py --model "$p"; replay "$p" "$work/$p.json" ;;
    gpt2_logits)
      capture "$p" --meta gpt2.py --mode logits --prompt 64; replay "$p" "$work/$p.json" ;;
    gpt2_generate)
      capture "$p" --meta gpt2.py --tokens 32 --prompt 8; replay "$p" "$work/$p.json" ;;
    gpt2_bounded)
      capture gpt2_generate --meta gpt2.py --tokens 32 --prompt 8
      replay "$p" "$work/gpt2_generate.json" --bound 'seq<=64' ;;
    mlp_sgd) capture "$p" mlp.py --train sgd; replay "$p" "$work/$p.json" ;;
    mlp_adam) capture "$p" mlp.py --train adam; replay "$p" "$work/$p.json" ;;
    transformer_sgd) capture "$p" transformer.py --opt sgd; replay "$p" "$work/$p.json" ;;
    transformer_adam) capture "$p" transformer.py --opt adam; replay "$p" "$work/$p.json" ;;
    *) echo "measure_models.sh: unknown program '$p'" >&2; exit 2 ;;
  esac
done
