#!/usr/bin/env bash
# Captures the programs listed in docs/MODELS.md and replays each in every execution mode on
# trn2, timing-only, under /usr/bin/time. Prints docs/MODELS.md's replay table in Markdown, one
# row per replay (scripts/models_row.py; load is the 1-minute load average when the replay
# ended; commit is this checkout's HEAD, so build WALLSIM from it). This is a benchmark, not a
# test: wall time depends on the machine and its load; the simulated columns are deterministic.
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
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
/usr/bin/python3 scripts/models_row.py --header

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
    /usr/bin/python3 scripts/models_row.py "$out/stats.json" "$name" "$mode" "$real" "$user" \
      "$rss" "$load" "$commit"
  done
}

for p in "${programs[@]}"; do
  case "$p" in
    resnet18|mobilenet_v2)
      capture "$p" --meta vision.py --model "$p"; replay "$p" "$work/$p.json" ;;
    vit_b_16)
      # Not --meta: on meta tensors PyTorch skips MultiheadAttention's fast path
      # (_native_multi_head_attention) and the capture sees its slow-path ops instead.
      capture "$p" vision.py --model "$p"; replay "$p" "$work/$p.json" ;;
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
