#!/usr/bin/env bash
# Captures issue 40's twelve models (torchvision's and torch.nn's, random weights, small inputs)
# with values and replays each functionally in every mode on trn2 for 2 steps (the second is
# warm in every mode but eager's recompiles), printing docs/MODELS.md's table (one row per
# replay, scripts/model_zoo_row.py). Not a test: it takes tens of minutes on a loaded machine.
#
# usage: scripts/model_zoo.sh [WALLSIM] [WORKDIR] [MODEL...]
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
wallsim="${1:-$here/build/bin/wallsim}"
work="${2:-/tmp/wallsim-zoo}"
shift $(($# < 2 ? $# : 2))
models=("$@")
vision=(squeezenet1_0 shufflenet_v2_x0_5 mnasnet0_5 regnet_y_400mf efficientnet_b0 densenet121
        convnext_tiny swin_t deeplabv3_mobilenet_v3_large)
sequence=(transformer_encoder lstm gru)
if [ ${#models[@]} -eq 0 ]; then models=("${vision[@]}" "${sequence[@]}"); fi
mkdir -p "$work"
/usr/bin/python3 "$here/scripts/model_zoo_row.py" --header
for m in "${models[@]}"; do
  case " ${vision[*]} " in
    *" $m "*) script=vision.py; args=(--model "$m" --size 64) ;;
    *) script=sequence.py; args=(--model "$m") ;;
  esac
  if [ ! -f "$work/$m.json" ]; then
    "$wallsim" capture "$here/examples/torch/$script" --out "$work/$m.json" --values \
      -- "${args[@]}" > /dev/null
  fi
  for mode in native eager fused aot; do
    out="$work/out-$m-$mode"
    rm -rf "$out"
    code=0
    "$wallsim" run -c "$here/configs/trn2.json" -w "program:file=$work/$m.json" --mode "$mode" \
      --functional --steps 2 --trace-level none --out "$out" > "$out.log" 2>&1 || code=$?
    /usr/bin/python3 "$here/scripts/model_zoo_row.py" "$out" "$m" "$mode" "$code"
  done
done
