// The graph file: JSON a person writes by hand, read strictly and written so it round-trips.
//
//   {"format": "wallsim-graph", "version": 1, "name": "mlp",
//    "scalars": [{"name": "len", "min": 1, "max": 512}],
//    "nodes": [{"id": 0, "op": "input", "name": "x", "dtype": "bf16", "shape": [512, 768],
//               "role": "input"},
//              {"id": 1, "op": "matmul", "inputs": [0, 2], "name": "fc1"}, ...],
//    "outputs": [3]}
//
// A shape entry is an integer (static), {"max": N, "scalar": "len"} (bounded) or "?" (unknown).
// Attributes are node keys from the op's list in ops.def; `dtype` may be given on any node to
// fix its output dtype. Keys starting with '_' are comments. Reading checks structure only (keys,
// value kinds, names of ops and dtypes); infer_types (validate.h) checks the meaning.
#pragma once

#include <string>

#include "wallsim/base/params.h"
#include "wallsim/compiler_stub/graph.h"

namespace wallsim::compiler_stub {

inline constexpr int kGraphFormatVersion = 1;

// Throws base::InputError with the JSON path ("nodes[3].axsi: unknown key").
Graph graph_from_json(const base::Json& j);
// Writes what the graph declares: inferred output types are not written, explicit dtypes are.
base::Json to_json(const Graph& g);

// Errors are prefixed with the file path, like isa::read_plan_file.
Graph read_graph_file(const std::string& path);
// Writes atomically (a temporary file renamed into place), formatted like plan files.
void write_graph_file(const Graph& g, const std::string& path);

}  // namespace wallsim::compiler_stub
