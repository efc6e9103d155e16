// Plans the SPMD-folding tests launch on every rank (tests/sim/fold*_test.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "wallsim/isa/copy_plan.h"
#include "wallsim/isa/plan_io.h"

namespace wallsim::sim::test_util {

// The first plan of examples/plans/<name>.json.
inline isa::Plan example(const std::string& name) {
  return isa::read_plan_file(std::string(WALLSIM_SOURCE_DIR) + "/examples/plans/" + name + ".json")
      .plans.at(0);
}

// A copy of rows x cols fp32 from `src` to `dst` space, one descriptor (as the runtime's host
// transfers).
inline isa::Plan copy_plan(isa::MemSpace src, isa::MemSpace dst, int64_t rows, int64_t cols) {
  return isa::copy_plan("copy", src, dst, isa::DType::fp32, rows, cols);
}

}  // namespace wallsim::sim::test_util
