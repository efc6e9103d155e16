// Composite ops (the `composite` kind of ops.def: pad, reduce): what both front ends build from
// several graph ops, written once. The compiler expands them before lowering and the reference
// evaluator evaluates the expansion, so the expansion is their one definition.
#pragma once

#include <cstdint>
#include <vector>

#include "wallsim/compiler_stub/graph.h"

namespace wallsim::compiler_stub {

// Which axes of a value of `rank` dims a `reduce` node reduces: its `axes` (negative ones
// counted from the end), or every axis when it has none. Out-of-range axes are left out
// (validation rejects them).
std::vector<bool> reduced_axes(const Node& n, int64_t rank);

// Whether any node of `g` is a composite.
bool has_composites(const Graph& g);

// `g` (typed: infer_types has run) with every composite node replaced by the ops it stands for.
// The node that yields a composite's value keeps the composite's id, name and output name, so
// graph outputs, other nodes' inputs and value names stay as they were; the nodes before it
// take fresh ids above every id of `g`, placed just before it. `expanded`, when given, receives
// per composite id the ids of its expansion in order (the composite's own id last). Throws
// base::InputError when an expansion cannot be built (a bounded dim where a reshape needs a
// static one).
Graph expand_composites(const Graph& g,
                        std::vector<std::pair<int32_t, std::vector<int32_t>>>* expanded = nullptr);

}  // namespace wallsim::compiler_stub
