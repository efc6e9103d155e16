// Estimates from a graph's shapes alone, before lowering: what the host must hold to compile and
// run it, so a run that cannot fit says so before the work starts.
#pragma once

#include <cstdint>
#include <vector>

#include "wallsim/compiler_stub/graph.h"
#include "wallsim/isa/arch_spec.h"

namespace wallsim::compiler_stub {

// What a group (`group`: node ids of `g`) must hold in HBM whatever the lowering does: the graph
// inputs it reads and the graph outputs it writes (at their bounds; unknown sizes count 0).
int64_t min_hbm_bytes(const Graph& g, const std::vector<int32_t>& group);

// A lower bound on the instructions of any plan for `nodes` of `g` on `arch`: one matmul
// instruction does at most rows x cols x moving_free_max multiply-accumulates. Everything else a
// plan holds (evacuations, element-wise work, DMA, synchronisation) only adds to it.
int64_t min_plan_instructions(const Graph& g, const std::vector<int32_t>& nodes,
                              const isa::ArchSpec& arch);

// Host bytes the simulator holds per instruction of a plan it lowers and runs: the instruction,
// its semaphore lists, the lowering's working copies and the device's launch state (measured,
// docs/PERFORMANCE.md "Host memory per instruction": 1.4 KB in a GEMM once the result's host
// copy is taken out, 1.9 KB over a static-serving start-up; a simulator property, not a
// modelled one).
inline constexpr int64_t kHostBytesPerInstruction = 2 * 1024;

// A lower bound on the host memory compiling `nodes` of `g` takes: min_plan_instructions times
// kHostBytesPerInstruction (saturating).
int64_t min_compile_host_bytes(const Graph& g, const std::vector<int32_t>& nodes,
                               const isa::ArchSpec& arch);

}  // namespace wallsim::compiler_stub
