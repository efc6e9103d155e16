#!/usr/bin/env bash
# The layering rules of DESIGN.md §2, checked on the source tree: every `#include "wallsim/X/..."`
# in folder F and every wallsim_X on F's target_link_libraries lines must name a folder F may
# depend on. A back-edge (isa including runtime, workloads including sim, ...) fails.
# It also checks that no execution-mode name (runtime/src/modes/*_mode.cpp) is written as a string
# literal in C++ outside runtime/ and tests/: mode lists come from the registry.
# Usage: scripts/check_dependencies.sh [ROOT]      check the tree at ROOT (default: the repository)
#        scripts/check_dependencies.sh --self-test  the checker on a clean and a broken tree
set -euo pipefail

# Folder -> the folders it may use (besides itself). Dependencies point one way:
# base <- isa <- memory <- dma, engines <- sim <- runtime <- workloads <- driver <- cli;
# isa <- collectives (algorithms as schedules, plain C++) <- sim (the collective engine);
# isa <- compiler_stub <- runtime; compiler_stub <- frontends (wallsim_onnx, wallsim_torch) <- cli;
# compiler_stub's PlanBuilder <- validation (published kernels as plans) <- cli;
# frontends/torch's program reader <- workloads (the program replay); sim, engines <- chakra
# (Chakra traces of retired launches) <- driver; traces is used by whatever observes.
declare -A ALLOWED=(
  [base]=""
  [traces]="base"
  [isa]="base"
  [collectives]="base isa"
  [memory]="base isa traces"
  [dma]="base isa memory traces"
  [engines]="base isa memory traces"
  [sim]="base isa memory dma engines traces collectives"
  [compiler_stub]="base isa"
  [runtime]="base isa memory sim compiler_stub traces"
  [workloads]="base isa compiler_stub runtime traces torch"  # torch: the program reader
  [chakra]="base isa memory dma engines sim collectives traces chakra_proto"  # Chakra export
  [driver]="base isa memory engines sim compiler_stub runtime workloads traces chakra"
  [frontends]="base isa memory compiler_stub onnx torch"  # wallsim_onnx, wallsim_torch
  [validation]="base isa compiler_stub"
  [cli]="base isa memory dma engines sim collectives compiler_stub validation runtime workloads driver traces frontends onnx"
)

check_tree() {
  local root=$1 bad=0
  for folder in "${!ALLOWED[@]}"; do
    [[ -d $root/$folder ]] || continue
    local allowed=" $folder ${ALLOWED[$folder]} "
    # Includes.
    while IFS=: read -r file line used; do
      if [[ $allowed != *" $used "* ]]; then
        echo "layering: ${file#"$root"/}:$line: $folder must not include wallsim/$used/" >&2
        bad=1
      fi
    done < <(grep -rnoE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]wallsim/[a-z_]+/' \
               --include='*.h' --include='*.cpp' --include='*.def' "$root/$folder" 2>/dev/null |
             sed -E 's#^([^:]+):([0-9]+):.*wallsim/([a-z_]+)/$#\1:\2:\3#' || true)
    # Target links.
    local cmake=$root/$folder/CMakeLists.txt
    [[ -f $cmake ]] || continue
    for used in $(perl -0ne 'while (/target_link_libraries\s*\(([^)]*)\)/g) { my @t = split /\s+/, $1; shift @t; for (@t) { print "$1\n" if /^wallsim_([a-z_]+)$/ } }' "$cmake" | sort -u); do
      [[ $used == systemc ]] && continue
      if [[ $allowed != *" $used "* ]]; then
        echo "layering: $folder/CMakeLists.txt: wallsim_$folder must not link wallsim_$used" >&2
        bad=1
      fi
    done
  done
  # Mode names as string literals outside runtime/ and tests/.
  local names
  names=$(grep -hoE 'name\(\) const override \{ return "[^"]+"' "$root"/runtime/src/modes/*_mode.cpp 2>/dev/null |
          sed -E 's/.*return "([^"]+)"/\1/' || true)
  for name in $names; do
    while IFS= read -r hit; do
      echo "layering: ${hit#"$root"/}: the mode name \"$name\" as a literal (use runtime::all_modes())" >&2
      bad=1
    done < <(grep -rnF "\"$name\"" --include='*.h' --include='*.cpp' "$root" 2>/dev/null |
             grep -vE "^$root/(runtime|tests|build[^/]*)/" | cut -d: -f1,2 || true)
  done
  return $bad
}

self_test() {
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  mkdir -p "$tmp/isa/src" "$tmp/runtime/src" "$tmp/workloads/src"
  echo '#include "wallsim/base/params.h"' >"$tmp/isa/src/a.cpp"
  echo '#include "wallsim/sim/device.h"' >"$tmp/runtime/src/b.cpp"
  echo 'target_link_libraries(wallsim_workloads PUBLIC wallsim_runtime)' >"$tmp/workloads/CMakeLists.txt"
  check_tree "$tmp" 2>/dev/null || { echo "self-test: a clean tree was rejected" >&2; return 1; }
  echo '#include "wallsim/runtime/session.h"' >>"$tmp/isa/src/a.cpp"
  if check_tree "$tmp" 2>/dev/null; then echo "self-test: an include back-edge passed" >&2; return 1; fi
  sed -i '$d' "$tmp/isa/src/a.cpp"
  echo 'target_link_libraries(wallsim_workloads PUBLIC wallsim_runtime wallsim_sim)' >"$tmp/workloads/CMakeLists.txt"
  if check_tree "$tmp" 2>/dev/null; then echo "self-test: a link back-edge passed" >&2; return 1; fi
  echo 'target_link_libraries(wallsim_workloads PUBLIC wallsim_runtime)' >"$tmp/workloads/CMakeLists.txt"
  mkdir -p "$tmp/runtime/src/modes" "$tmp/cli/src"
  echo 'std::string_view name() const override { return "turbo"; }' >"$tmp/runtime/src/modes/turbo_mode.cpp"
  echo 'const char* m = "fast";' >"$tmp/cli/src/c.cpp"
  check_tree "$tmp" 2>/dev/null || { echo "self-test: a tree without mode literals was rejected" >&2; return 1; }
  echo 'const char* m = "turbo";' >"$tmp/cli/src/c.cpp"
  if check_tree "$tmp" 2>/dev/null; then echo "self-test: a mode-name literal passed" >&2; return 1; fi
  echo "self-test: ok"
}

if [[ ${1:-} == --self-test ]]; then
  self_test
else
  root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
  check_tree "$root" && echo "layering: ok"
fi
