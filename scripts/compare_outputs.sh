#!/usr/bin/env bash
# Runs a fixed set of wallsim jobs and writes their outputs to one folder, or compares two such
# folders byte for byte: the check that a refactor changes no result.
#
#   scripts/compare_outputs.sh run WALLSIM OUTDIR     # run every job with this binary
#   scripts/compare_outputs.sh diff BEFORE AFTER      # exit 0 when every output is identical
#
# A job's outputs are its stats.json without the `measured` section (real wall-clock figures),
# its trace.json, the plan files `compile` writes, and its exit code and stderr (so a job that
# failed before must fail the same way). The set: `compile` + `exec` of every example graph in
# both groupings on trn2 and tiny; `run` of gemm, mlp, transformer, decode, serve and mask in
# every mode (small sizes, a few seconds each); one study and one sweep. Needs jq.
set -uo pipefail
cd "$(dirname "$0")/.."

modes=(native eager eager-debug fused aot)
# Small enough to run in seconds; large enough to spill, window and cut groups.
workloads=(
  "gemm:m=512,k=768,n=1024"
  "mlp:batch=256,d_model=256,d_ff=1024,layers=2"
  "transformer:layers=2,seq=256,d_model=256,heads=4,d_ff=1024"
  "decode:layers=2,prompt=32,new_tokens=6,d_model=128,heads=4,d_ff=256"
  "decode:layers=1,prompt=20,new_tokens=5,d_model=128,heads=2,d_ff=256,dynamic=bounded,kv=paged,block=8"
  "serve:requests=6,layers=2,d_model=64,heads=4,d_ff=128,vocab=100,context=64,max_prompt=32,prompt_mean=12,max_batch=4,block=4"
  "serve:requests=6,layers=1,d_model=64,heads=4,d_ff=128,vocab=100,context=64,max_prompt=32,prompt_mean=12,max_batch=4,block=4,scheduler=static"
  "mask:seq=256,segments=4,d_model=128,heads=2"
  "mask:seq=256,segments=4,d_model=128,heads=2,mask=chip"
)

# Records one job: exit code, stderr, and the outputs that must not change.
record() {  # record NAME DIR -- command...
  local name=$1 dir=$2; shift 3
  local dest=$out/$name
  mkdir -p "$dest"
  "$@" >"$dest/stdout.raw" 2>"$dest/stderr.raw"
  echo $? >"$dest/rc"
  # Progress lines (sweep, study) carry ETAs and finish in any order.
  # stdout carries real seconds; keep only lines without them. Parallel jobs (sweep, study)
  # finish in any order, so their lines are sorted.
  local order=cat
  [[ $name == study_* || $name == sweep_* ]] && order=sort
  grep -v -E 'eta [0-9]|[0-9]+/[0-9]+ done' "$dest/stderr.raw" | sed "s|$tmp|TMP|g" | $order >"$dest/stderr"
  # Progress counters "(k/N)" follow completion order, so they are dropped.
  grep -v -E 'simulated in|[0-9.]+ s$|seconds' "$dest/stdout.raw" | sed -E "s|$tmp|TMP|g; s|\([0-9]+/[0-9]+\) ||" |
    $order >"$dest/stdout"
  rm -f "$dest/stderr.raw" "$dest/stdout.raw"
  if [[ -f "$dir/stats.json" ]]; then jq -S 'del(.measured)' "$dir/stats.json" >"$dest/stats.json"; fi
  if [[ -f "$dir/trace.json" ]]; then cp "$dir/trace.json" "$dest/trace.json"; fi
}

run_all() {
  local w=$1
  out=$(realpath -m "$2")
  rm -rf "$out" && mkdir -p "$out"
  local tmp
  tmp=$(mktemp -d)
  for cfg in trn2 tiny; do
    for g in examples/graphs/*.json; do
      local gn
      gn=$(basename "$g" .json)
      # gemm_4096 on tiny is a 0.9 M-instruction plan (a 741 MB plan file, minutes to write and
      # trace): too heavy for this quick check; docs/PERFORMANCE.md (issue 17g) measures it.
      [[ $cfg == tiny && $gn == gemm_4096 ]] && continue
      for grp in all per-op; do
        local n=compile_${cfg}_${gn}_${grp}
        record "$n" "$tmp/none" -- "$w" compile "$g" -c "configs/$cfg.json" --group "$grp" --out "$tmp/$n.plan.json"
        [[ -f "$tmp/$n.plan.json" ]] && cp "$tmp/$n.plan.json" "$out/$n/plan.json"
        [[ -f "$tmp/$n.plan.json" ]] || continue
        local scalars=()
        [[ $gn == decode_attention ]] && scalars=(--scalar len=77)
        record "exec_${cfg}_${gn}_${grp}" "$tmp/exec_$n" -- "$w" exec "$tmp/$n.plan.json" -c "configs/$cfg.json" \
          "${scalars[@]}" --trace-level instructions --out "$tmp/exec_$n"
      done
    done
  done
  local i=0
  for wl in "${workloads[@]}"; do
    for m in "${modes[@]}"; do
      local n
      n=run_$(printf %02d $i)_${wl%%:*}_$m
      local steps=(--steps 2)
      [[ $wl == decode:* || $wl == serve:* ]] && steps=()  # these fix their own steps
      record "$n" "$tmp/$n" -- "$w" run -c configs/trn2.json -w "$wl" --mode "$m" "${steps[@]}" \
        --trace-level instructions --out "$tmp/$n"
    done
    i=$((i + 1))
  done
  # Functional runs compare values too (through stats and traces; outputs are not written by run).
  record run_functional_mlp "$tmp/fmlp" -- "$w" run -c configs/tiny.json -w "mlp:batch=64,d_model=64,d_ff=128" \
    --mode fused --functional --steps 2 --out "$tmp/fmlp"
  # A failing run must fail the same way.
  record run_fail_bucket "$tmp/fail" -- "$w" run -c configs/trn2.json -w "gemm:m=4096,k=4096,n=4096" --mode aot \
    --set runtime.aot.bucket_max=1024 --out "$tmp/fail"
  # One study and one sweep: their tables and results without wall-clock columns.
  record study_fallback "$tmp/study" -- "$w" study fallback -c configs/trn2.json --out "$tmp/study" --jobs 2
  for f in "$tmp"/study/*.md "$tmp"/study/*.csv; do [[ -f $f ]] && cp "$f" "$out/study_fallback/"; done
  for r in "$tmp"/study/runs/*/; do
    local rn
    rn=$(basename "$r")
    [[ -f $r/stats.json ]] && jq -S 'del(.measured)' "$r/stats.json" >"$out/study_fallback/$rn.stats.json"
  done
  record sweep_smoke "$tmp/sweep" -- "$w" sweep configs/sweeps/smoke.json --out "$tmp/sweep" --jobs 2
  # Points are named by index: a point's id hashes the resolved config, which may gain keys.
  if [[ -f $tmp/sweep/results.jsonl ]]; then
    jq -S -c 'del(.seconds, .id)' "$tmp/sweep/results.jsonl" | sort >"$out/sweep_smoke/results.jsonl"
    jq -r '"\(.index) \(.id)"' "$tmp/sweep/results.jsonl" | while read -r idx id; do
      [[ -f $tmp/sweep/points/$id/stats.json ]] &&
        jq -S 'del(.measured)' "$tmp/sweep/points/$id/stats.json" >"$out/sweep_smoke/point_$idx.stats.json"
    done
  fi
  rm -rf "$tmp"
  echo "compare_outputs: $(find "$out" -mindepth 1 -maxdepth 1 -type d | wc -l) jobs recorded in $out"
}

case "${1:-}" in
  run) [[ $# -eq 3 ]] || { echo "usage: $0 run WALLSIM OUTDIR" >&2; exit 2; }; run_all "$2" "$3" ;;
  diff)
    [[ $# -eq 3 ]] || { echo "usage: $0 diff BEFORE AFTER" >&2; exit 2; }
    if diff -rq "$2" "$3"; then
      echo "compare_outputs: identical ($(find "$2" -type f | wc -l) files)"
    else
      echo "compare_outputs: outputs differ" >&2; exit 1
    fi
    ;;
  *) echo "usage: $0 run WALLSIM OUTDIR | diff BEFORE AFTER" >&2; exit 2 ;;
esac
