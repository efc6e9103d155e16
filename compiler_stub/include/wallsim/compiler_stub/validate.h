// Graph validation and shape inference: the first pass of every compile and of the reference.
#pragma once

#include <cstddef>
#include <string>

#include "wallsim/compiler_stub/graph.h"

namespace wallsim::compiler_stub {

// Checks every node against its op's rules in ops.def and fills in each node's output type
// (input and iota keep their declared type). Also checks the scalars (unique names,
// 0 <= min <= max), unique node ids and names, inputs in topological order, and the outputs.
// Throws base::InputError with path "nodes[i] (op 'NAME')" (or "scalars[i]", "outputs[i]") and a
// one-line problem. Unknown dims pass through; has_unknown_dims tells whether any remain.
//
// Shape rules: element-wise ops broadcast like numpy (right-aligned, 1 broadcasts); two dims
// describe the same extent when both are static and equal, both bounded by the same scalar and
// max, or one is bounded and the other static at its max (the result stays bounded); an unknown
// dim matches anything. The output dtype is the first input's (select: on_true's; embedding:
// the table's) unless the node has an explicit `dtype`.
void infer_types(Graph& g);

// Checks one node `n` whose inputs are nodes of `g` with their types already inferred, and
// returns its output type: how a runtime types the ops it records one at a time. Throws
// base::InputError with path "op 'NAME'".
TensorType infer_node(const Graph& g, const Node& n);

// Whether any node's type (after infer_types) has an unknown dim; a static compile rejects them.
bool has_unknown_dims(const Graph& g);

// The error path of g.nodes[index]: "nodes[3] (op 'matmul')".
std::string node_path(const Graph& g, size_t index);

}  // namespace wallsim::compiler_stub
