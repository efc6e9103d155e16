// Helpers for ISA tests: the example plans and JSON surgery on them.
#pragma once

#include <string>

#include "wallsim/isa/plan_io.h"

namespace wallsim::isa::testing {

inline std::string example_path(const std::string& name) {
  return std::string(WALLSIM_SOURCE_DIR) + "/examples/plans/" + name + ".json";
}
inline base::Json example_json(const std::string& name) {
  return base::read_json_file(example_path(name));
}
inline Plan example_plan(const std::string& name) {
  return plan_sequence_from_json(example_json(name)).plans.at(0);
}

}  // namespace wallsim::isa::testing
