// Pieces several execution modes share (private to runtime/src/modes).
#pragma once

#include <cstdint>
#include <vector>

#include "wallsim/runtime/execution_mode.h"

namespace wallsim::runtime::modes {

// Strict per-op execution: every op is a group of its own.
inline std::vector<std::vector<int32_t>> one_group_per_op(const std::vector<int32_t>& ops) {
  std::vector<std::vector<int32_t>> groups;
  groups.reserve(ops.size());
  for (int32_t id : ops) groups.push_back({id});
  return groups;
}

// Strict per-op execution (native, eager, eager-debug): an op pays the framework's dispatch,
// flushes at once and is a group of its own.
class PerOpMode : public ExecutionMode {
 public:
  OpCost op_cost(const RuntimeConfig& r) const override { return {r.dispatch_ns_per_op, 0}; }
  const char* flush_after_op(int64_t, const RuntimeConfig&) const override { return "op"; }
  std::vector<std::vector<int32_t>> cut(const OpStream& s) const override {
    return one_group_per_op(s.ops);
  }
};

}  // namespace wallsim::runtime::modes
