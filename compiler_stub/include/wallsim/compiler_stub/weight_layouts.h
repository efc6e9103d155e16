// Device layouts of weights: the axis order a constant is stored in on the device, chosen once
// from the ops that read it, as ahead-of-time compilers pre-lay constants. Plain data; no SystemC.
#pragma once

#include <cstdint>
#include <vector>

#include "wallsim/compiler_stub/graph.h"
#include "wallsim/compiler_stub/reference.h"

namespace wallsim::compiler_stub {

// A weight's device layout: axis i of the stored tensor is logical axis perm[i] (the stored
// tensor is transpose(weight, perm)). Empty: stored as given.
struct WeightLayout {
  std::vector<int64_t> perm;
  bool as_given() const { return perm.empty(); }
  bool operator==(const WeightLayout& o) const { return perm == o.perm; }
};

// The layout a weight of `type` should be stored in when `consumers` are every op that reads
// it. When all of them are transposes with one permutation (nn.Linear's weight.t(), a
// MultiheadAttention projection's permute), that permutation: each of those transposes then
// reads the stored tensor as it is, so none runs at all and its consumer (a matmul) reads the
// weight in the layout the array wants. Otherwise (no consumer, a consumer that reads the
// weight as given, or two permutations) as given: a transpose then runs only where a producer
// and a consumer disagree, as any other.
WeightLayout choose_weight_layout(const TensorType& type,
                                  const std::vector<const Node*>& consumers);

// The stored tensor's type, and its values from the weight's (row-major) values.
TensorType stored_type(const TensorType& logical, const WeightLayout& layout);
HostTensor lay_out(const HostTensor& logical, isa::DType dtype, const WeightLayout& layout);

// The permutation that undoes `layout` (a transpose by it turns the stored tensor back into the
// weight as given).
std::vector<int64_t> inverse(const WeightLayout& layout);

}  // namespace wallsim::compiler_stub
