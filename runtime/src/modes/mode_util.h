// Pieces several execution modes share (private to runtime/src/modes).
#pragma once

#include <cstdint>
#include <vector>

namespace wallsim::runtime::modes {

// Strict per-op execution: every op is a group of its own.
inline std::vector<std::vector<int32_t>> one_group_per_op(const std::vector<int32_t>& ops) {
  std::vector<std::vector<int32_t>> groups;
  groups.reserve(ops.size());
  for (int32_t id : ops) groups.push_back({id});
  return groups;
}

}  // namespace wallsim::runtime::modes
