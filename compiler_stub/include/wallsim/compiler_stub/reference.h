// The reference evaluator: every node of a graph in fp32 on the host (Eigen), the oracle that
// functional runs of compiled plans are checked against.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "wallsim/compiler_stub/graph.h"

namespace wallsim::compiler_stub {

// Row-major float32 values; int32 tensors hold their integers as floats.
struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// Evaluates every node (infer_types runs on a copy of `g` first) and returns the values by node
// id. Bounded dims are evaluated at their bounds: inputs are given at the bound, and the graph
// itself masks what lies past the run-time extent (iota, compare, select). Unknown dims of inputs
// take the extents of the tensors given for them.
//
// Numerics follow the chip: fp32 arithmetic, matmul accumulating in fp32; every input is
// rounded to its dtype before use and every node's output to its dtype (what storing to a bf16,
// fp16 or int32 tensor does). gelu is the erf form, softmax subtracts the row max, layernorm
// uses the biased variance, compare yields 1/0.
//
// Throws base::InputError for a missing, unknown or misshapen input, a missing, unknown or
// out-of-range scalar, an embedding id out of range, an invalid graph (as infer_types), or an
// unknown dim left after binding the inputs.
std::map<int32_t, HostTensor> evaluate(const Graph& g,
                                       const std::map<std::string, HostTensor>& inputs_by_name,
                                       const std::map<std::string, int64_t>& scalars);

// The value a stored element of `dtype` holds for `v` (bf16, fp16: round to nearest even;
// int32: round to nearest, saturating; fp32: `v`).
float round_to_dtype(isa::DType dtype, float v);

}  // namespace wallsim::compiler_stub
