#!/usr/bin/env bash
# Mechanical move of general infrastructure out of isa/ (issue 15):
#   - isa/params.h, isa/json_object.h, isa/src/params.cpp -> base/ (namespace wallsim::base,
#     target wallsim_base that wallsim_isa links);
#   - memory/dtype_convert.{h,cpp} -> isa/ (namespace wallsim::isa), so compiler_stub no longer
#     links wallsim_memory.
# Usage (from the repository root):
#   scripts/refactor/move_to_base.sh            move the files, then rewrite the whole tree
#   scripts/refactor/move_to_base.sh rewrite [FILE...]
#                                               only rewrite includes and qualifiers (idempotent):
#                                               run it over files written before the move (e.g.
#                                               new compiler_stub/src/*.cpp) when merging.
set -euo pipefail

# Names that moved from wallsim::isa to wallsim::base.
BASE_NAMES='InputError|JsonObject|JsonReader|JsonWriter|SchemaWriter|KeyRow|KeyTableWriter|read_params|write_params|schema_of|key_rows|apply_override|read_json_file|abbreviate|json_index|IntRange|RealRange|ParamSpec|ParamVisitor|EnumTraits|enum_names|describe_expectation|Json'
# Names that moved from wallsim::memory to wallsim::isa.
DTYPE_NAMES='float_bits|bits_float|bf16_to_float|float_to_bf16|fp16_to_float|float_to_fp16|float_to_int32|load_elements|store_elements|load_element|store_element'
# Of those, the ones argument-dependent lookup cannot find from namespace memory (no DType
# argument): bare uses inside namespace memory get an explicit isa::.
DTYPE_NON_ADL='float_bits|bits_float|bf16_to_float|float_to_bf16|fp16_to_float|float_to_fp16|float_to_int32'

rewrite_file() {
  local f=$1
  [[ -f $f ]] || return 0
  perl -0pi -e '
    s{"wallsim/isa/params\.h"}{"wallsim/base/params.h"}g;
    s{"wallsim/isa/json_object\.h"}{"wallsim/base/json_object.h"}g;
    s{"wallsim/memory/dtype_convert\.h"}{"wallsim/isa/dtype_convert.h"}g;
    s{\bisa::('"$BASE_NAMES"')\b}{base::$1}g;
    s{\bmemory::('"$DTYPE_NAMES"')\b}{isa::$1}g;
    # EnumTraits specialisations for other folders'"'"' enums now live in wallsim::base.
    s#namespace wallsim::isa \{\n(template <>\nstruct EnumTraits<.*?)\}  // namespace wallsim::isa#namespace wallsim::base {\n$1}  // namespace wallsim::base#gs;
  ' "$f"
  case $f in
    isa/src/*.cpp | tests/isa/*.cpp | bench/isa_bench.cpp)
      # Code inside namespace wallsim::isa that used the moved names unqualified: a using-
      # declaration per name, private to the translation unit.
      perl -0pi -e '
        my $names = q('"$BASE_NAMES"');
        my %used;
        my $body = $_;
        $body =~ s{//[^\n]*}{}g;
        while ($body =~ m{(?<![\w:])($names)\b}g) { $used{$1} = 1; }
        my $decl = join("", map { "using base::$_;\n" } grep { !/^(EnumTraits|ParamVisitor)$/ } sort keys %used);
        if ($decl ne "" && !/using base::/) { s{(namespace wallsim::isa \{\n)}{$1\n$decl}; }
      ' "$f"
      ;;
    isa/include/wallsim/isa/*.h | tests/isa/*.h)
      # Headers qualify instead, so isa:: does not re-export the moved names.
      perl -pi -e 'next if m{^\s*//|struct EnumTraits<}; s{(?<![\w:"])('"$BASE_NAMES"')\b(?!\.h)}{base::$1}g' "$f"
      ;;
    memory/src/*.cpp | memory/include/wallsim/memory/*.h | tests/memory/*.cpp)
      perl -pi -e 'next if m{^\s*//}; s{(?<![\w:])('"$DTYPE_NON_ADL"')\s*\(}{isa::$1(}g' "$f"
      ;;
  esac
}

rewrite_tree() {
  local files
  files=$(git ls-files '*.h' '*.cpp' '*.def' | grep -v '^base/\|^isa/include/wallsim/isa/dtype_convert.h\|^isa/src/dtype_convert.cpp\|^tests/isa/dtype_convert_test.cpp' || true)
  for f in $files; do rewrite_file "$f"; done
  # Docs name header paths.
  for f in $(git ls-files '*.md'); do
    perl -pi -e 's{isa/include/wallsim/isa/params\.h}{base/include/wallsim/base/params.h}g;
                 s{wallsim/isa/params\.h}{wallsim/base/params.h}g;
                 s{memory/dtype_convert\.h}{isa/dtype_convert.h}g' "$f"
  done
}

move_files() {
  mkdir -p base/include/wallsim/base base/src
  git mv isa/include/wallsim/isa/params.h base/include/wallsim/base/params.h
  git mv isa/include/wallsim/isa/json_object.h base/include/wallsim/base/json_object.h
  git mv isa/src/params.cpp base/src/params.cpp
  git mv memory/include/wallsim/memory/dtype_convert.h isa/include/wallsim/isa/dtype_convert.h
  git mv memory/src/dtype_convert.cpp isa/src/dtype_convert.cpp
  git mv tests/memory/dtype_convert_test.cpp tests/isa/dtype_convert_test.cpp

  # base: namespace and includes.
  for f in base/include/wallsim/base/params.h base/include/wallsim/base/json_object.h base/src/params.cpp; do
    perl -pi -e 's{wallsim::isa}{wallsim::base}g;
                 s{"wallsim/isa/params\.h"}{"wallsim/base/params.h"}g;
                 s{"wallsim/isa/json_object\.h"}{"wallsim/base/json_object.h"}g' "$f"
  done
  # params.h no longer knows isa's enums: the EnumTraits primary template and enum_names go to
  # base/enum_traits.h; isa/types.h specialises it for DType, MemSpace and Engine.
  perl -0pi -e '
    s{#include "wallsim/isa/types.h"\n}{#include "wallsim/base/enum_traits.h"\n};
    s{// Enumerations usable as config values:.*?\n(?=// What a visitor is told)}{}s;
  ' base/include/wallsim/base/params.h
  cat > base/include/wallsim/base/enum_traits.h <<'EOF'
// Enumerations usable as config values: EnumTraits<E>::kCount and `name_of(E)` (found by
// argument-dependent lookup) for each value. The owner of an enum specialises EnumTraits.
#pragma once

#include <string>
#include <vector>

namespace wallsim::base {

template <class E>
struct EnumTraits;

template <class E>
std::vector<std::string> enum_names() {
  std::vector<std::string> out;
  for (int i = 0; i < EnumTraits<E>::kCount; ++i) out.emplace_back(name_of(static_cast<E>(i)));
  return out;
}

}  // namespace wallsim::base
EOF
  perl -0pi -e '
    s{(#include <string_view>\n)}{$1\n#include "wallsim/base/enum_traits.h"\n};
    s{\z}{\nnamespace wallsim::base {\ntemplate <>\nstruct EnumTraits<isa::DType> {\n  static constexpr int kCount = isa::kNumDTypes;\n};\ntemplate <>\nstruct EnumTraits<isa::MemSpace> {\n  static constexpr int kCount = isa::kNumMemSpaces;\n};\ntemplate <>\nstruct EnumTraits<isa::Engine> {\n  static constexpr int kCount = isa::kNumEngines;\n};\n}  // namespace wallsim::base\n};
  ' isa/include/wallsim/isa/types.h

  # dtype conversion: namespace isa.
  for f in isa/include/wallsim/isa/dtype_convert.h isa/src/dtype_convert.cpp tests/isa/dtype_convert_test.cpp; do
    perl -pi -e 's{wallsim::memory}{wallsim::isa}g;
                 s{"wallsim/memory/dtype_convert\.h"}{"wallsim/isa/dtype_convert.h"}g;
                 s{using isa::DType;}{}' "$f"
  done
  perl -0pi -e 's{\n\n\n}{\n\n}g' tests/isa/dtype_convert_test.cpp

  # CMake: the new target, and the link lines.
  cat > base/CMakeLists.txt <<'EOF'
# wallsim_base: what every layer uses and none owns — config description (describe()/params),
# InputError, strict JSON reading. Depends on no other wallsim folder.
add_library(wallsim_base STATIC
  src/params.cpp
)
target_include_directories(wallsim_base PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
target_link_libraries(wallsim_base PUBLIC nlohmann_json::nlohmann_json)
EOF
  perl -pi -e 's{^add_subdirectory\(traces\)}{add_subdirectory(base)\nadd_subdirectory(traces)}' CMakeLists.txt
  perl -pi -e 's{^  src/params\.cpp\n}{}; s{^  src/types\.cpp\n}{  src/types.cpp\n  src/dtype_convert.cpp\n};
               s{target_link_libraries\(wallsim_isa PUBLIC nlohmann_json::nlohmann_json\)}{target_link_libraries(wallsim_isa PUBLIC wallsim_base)}' isa/CMakeLists.txt
  perl -pi -e 's{^  src/dtype_convert\.cpp\n}{}' memory/CMakeLists.txt
  perl -pi -e 's{PUBLIC wallsim_isa wallsim_memory Eigen3}{PUBLIC wallsim_isa Eigen3}' compiler_stub/CMakeLists.txt
  perl -pi -e 's{^  dtype_convert_test\.cpp\n}{}' tests/memory/CMakeLists.txt
  perl -pi -e 's{^  access_pattern_test\.cpp\n}{  access_pattern_test.cpp\n  dtype_convert_test.cpp\n}' tests/isa/CMakeLists.txt
}

cd "$(git rev-parse --show-toplevel)"
case ${1:-all} in
  rewrite)
    shift
    if [[ $# -eq 0 ]]; then rewrite_tree; else for f in "$@"; do rewrite_file "$f"; done; fi
    ;;
  all)
    move_files
    rewrite_tree
    if command -v clang-format >/dev/null; then
      git diff --name-only -- '*.h' '*.cpp' | xargs -r clang-format -i
      git ls-files --others --exclude-standard -- '*.h' '*.cpp' | xargs -r clang-format -i
      clang-format -i base/include/wallsim/base/*.h base/src/*.cpp isa/include/wallsim/isa/*.h isa/src/*.cpp tests/isa/*.cpp
    fi
    ;;
  *)
    echo "usage: $0 [all | rewrite [FILE...]]" >&2
    exit 2
    ;;
esac
