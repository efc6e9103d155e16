// The canonical signature of a group of graph nodes — ops, attributes, shapes (bounded dims by
// their maximum), dtypes and the target ArchSpec — stable across runs and machines: the key of
// every compile cache.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wallsim/compiler_stub/graph.h"
#include "wallsim/isa/arch_spec.h"

namespace wallsim::compiler_stub {

struct GroupSignature {
  std::string text;         // canonical, human-readable
  uint64_t hash = 0;        // FNV-1a 64 of `text`
  uint64_t shape_free = 0;  // the same without shapes: equal for recompiles of one group
  std::string hex() const;  // 16 hex digits of `hash`
};

// A stable hash of everything the compiler reads from the ArchSpec; compute it once per chip.
uint64_t arch_fingerprint(const isa::ArchSpec& arch);

// Node ids inside the group are renumbered by position, so the same computation built twice
// (or by two processes) gets the same signature.
GroupSignature group_signature(const Graph& g, const std::vector<int32_t>& group,
                               uint64_t arch_fingerprint);

uint64_t fnv1a64(const std::string& s);

}  // namespace wallsim::compiler_stub
