// The compiler's entry point: validate, partition into groups by a caller-given policy, lower
// each group to a plan, verify it. Failures come back as values.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "wallsim/compiler_stub/graph.h"
#include "wallsim/compiler_stub/lower.h"
#include "wallsim/isa/arch_spec.h"
#include "wallsim/isa/plan.h"

namespace wallsim::compiler_stub {

// How nodes are cut into groups: the whole graph as one group, one op per group, or groups
// the caller lists.
enum class GroupPolicy { whole, per_op, explicit_groups };

// Groups of node ids in graph order; input nodes belong to no group (they live in HBM).
std::vector<std::vector<int32_t>> partition(
    const Graph& g, GroupPolicy policy,
    const std::vector<std::vector<int32_t>>& explicit_groups = {});

struct CompiledGraph {
  isa::PlanSequence plans;          // one per group, launched in order
  std::vector<LowerStats> groups;   // per plan
  double compile_wall_seconds = 0;  // real time compiler_stub took (not simulated time)
};

// Compiles `g` (types inferred) for `arch`. Every plan it returns has passed the verifier; a
// verifier finding would be a compiler bug and is returned as a CompileError too. `options`
// are the lowering's heuristics (the config's compiler.* keys).
std::variant<CompiledGraph, CompileError> compile_graph(
    const Graph& g, const isa::ArchSpec& arch, GroupPolicy policy,
    const std::vector<std::vector<int32_t>>& groups = {}, const LoweringOptions& options = {});

// Which compiler this is: 16 hex digits of a hash over the sources of compiler_stub and the ISA
// it was built from (generated at build time: cmake/BuildId.cmake). Plans cached
// across runs are keyed by it, as ahead-of-time compilers key their caches by compiler version.
const char* build_id();

}  // namespace wallsim::compiler_stub
