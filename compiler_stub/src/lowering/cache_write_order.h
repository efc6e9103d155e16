// The order a group's ops are lowered in, with KV-cache writes moved up (cache_write_order.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "wallsim/compiler_stub/graph.h"
#include "wallsim/compiler_stub/lower.h"

namespace wallsim::compiler_stub::lowering {

// `group` with each dynamic_update_slice whose update is computed in the group moved, with that
// update's producer, to just after the producer's inputs (keeping the moved ones in their
// order): a decode step's K and V projections and their cache writes then come before the Q
// projection, so the writes, and the attention's reads of the rows they write, run while the
// array works on Q instead of after it. Only where the cache's old value has no other reader.
std::vector<int32_t> hoist_cache_writes(const Graph& g, const std::vector<int32_t>& group,
                                        const GraphUses& uses);

}  // namespace wallsim::compiler_stub::lowering
