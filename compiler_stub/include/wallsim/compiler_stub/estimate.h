// Estimates from a graph's shapes alone, before lowering: what the host must hold to compile and
// run it, so a run that cannot fit says so before the work starts.
#pragma once

#include <cstdint>
#include <vector>

#include "wallsim/compiler_stub/graph.h"
#include "wallsim/isa/arch_spec.h"

namespace wallsim::compiler_stub {

// A lower bound on the instructions of any plan for `nodes` of `g` on `arch`: one matmul
// instruction does at most rows x cols x moving_free_max multiply-accumulates. Everything else a
// plan holds (evacuations, element-wise work, DMA, synchronisation) only adds to it.
int64_t min_plan_instructions(const Graph& g, const std::vector<int32_t>& nodes,
                              const isa::ArchSpec& arch);

}  // namespace wallsim::compiler_stub
