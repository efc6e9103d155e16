// Rewrites of one group's graph before it is lowered (attention recognised from its ops, a
// matmul fused with its bias_add): found by reading the graph, then applied to a copy of the
// group alone, so a rewrite costs time and memory in the group's size, not the graph's.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "wallsim/compiler_stub/graph.h"
#include "wallsim/compiler_stub/lower.h"

namespace wallsim::compiler_stub {

// A group copied out of its graph: the group's nodes and the nodes whose values they read
// (with the in-place chains behind those, which name their HBM tensors), sorted by id, so
// Graph::find stays logarithmic; `graph.outputs` are the group's values read after it (graph
// outputs and values with a consumer outside the group), so GraphUses(graph) tells lowering
// the same as the whole graph's uses did. Ids are those of the whole graph.
struct GroupGraph {
  Graph graph;
  std::vector<int32_t> group;  // in lowering order
};
GroupGraph extract_group(const Graph& g, const std::vector<int32_t>& group, const GraphUses& uses);

// Attention spelt out in ops, recognised in a group: per match, the nodes it replaces and the
// `attention` node that replaces them. Found by reading `g` (no copy); see fuse_attention.cpp
// for the forms recognised and the conditions under which the rewrite is exact.
struct AttentionMatch {
  int32_t q = -1, k = -1, v = -1;  // the op's operands: the values the heads are views of
  int32_t bias = -1;               // a dense additive mask, or -1
  bool bias_reshape = false;       // the bias is [1.., Lq, Lk]: reshaped to [Lq, Lk] first
  int64_t heads = 1, seq = 0, lq = 0, lk = 0;
  double scale = 1;
  bool causal = false;
  int32_t out = -1;            // the value the op produces (its consumers unchanged)
  bool out_reshape = false;    // `out` has another shape than q: it becomes a reshape of the op
  std::vector<int32_t> core;   // nodes replaced: scores .. softmax .. P.V .. up to `out`
  std::vector<int32_t> views;  // q, k, v head views and mask nodes: dropped once unused
};
std::vector<AttentionMatch> find_attention(const Graph& g, const std::vector<int32_t>& group,
                                           const GraphUses& uses);
// Applies the matches to `r` (nodes of the matches' graph): each match's core leaves the
// group, the attention node takes `out`'s place, and head views and mask nodes no longer read
// leave too. False when a rewritten node fails validation (then `r` must not be used).
bool apply_attention(GroupGraph& r, const std::vector<AttentionMatch>& matches,
                     const GraphUses& uses);

}  // namespace wallsim::compiler_stub
