// Device layouts of weights: the axis order a constant is stored in on the device, chosen once
// from the ops that read it, as ahead-of-time compilers pre-lay constants. Plain data; no SystemC.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "wallsim/compiler_stub/graph.h"
#include "wallsim/compiler_stub/reference.h"

namespace wallsim::compiler_stub {

// A weight's device layout: the stored tensor is transpose(reshape(weight, reshape), perm), the
// reshape left out when `reshape` is empty (axis i of the stored tensor is then logical axis
// perm[i]). Both empty: stored as given.
struct WeightLayout {
  std::vector<int64_t> perm;
  std::vector<int64_t> reshape = {};  // the dims the weight is first reshaped to; empty: none
  bool as_given() const { return perm.empty(); }
  bool operator==(const WeightLayout& o) const { return perm == o.perm && reshape == o.reshape; }
};

// Every op that reads the value node `id` produces (of the same graph or program), or nullptr
// when something other than an op (the host) reads it too.
using ReadersOf = std::function<const std::vector<const Node*>*(int32_t id)>;

// The layout a weight of `type` should be stored in when `consumers` are every op that reads
// it. When all of them are transposes with one permutation (nn.Linear's weight.t(), a
// MultiheadAttention projection's permute), that permutation: each of those transposes then
// reads the stored tensor as it is, so none runs at all and its consumer (a matmul) reads the
// weight in the layout the array wants. Otherwise (no consumer, a consumer that reads the
// weight as given, or two permutations) as given: a transpose then runs only where a producer
// and a consumer disagree, as any other.
// With `readers_of`, a chain of layout-only ops is followed too: when every reader is a reshape
// to one and the same (static) shape, and every reader of those reshapes (`readers_of`) is a
// transpose with one permutation (a convolution's weight, [Cout, Cin, kh, kw] reshaped to
// [Cout, K] and transposed for the array), the weight is stored as the chain's result and both
// ops of the chain read it as it is.
WeightLayout choose_weight_layout(const TensorType& type, const std::vector<const Node*>& consumers,
                                  const ReadersOf& readers_of = {});

// The stored tensor's type, and its values from the weight's (row-major) values.
TensorType stored_type(const TensorType& logical, const WeightLayout& layout);
HostTensor lay_out(const HostTensor& logical, isa::DType dtype, const WeightLayout& layout);

// The permutation that undoes `layout`'s transpose (a transpose by it turns the stored tensor
// back into the weight as given, or into its reshape when the layout has one).
std::vector<int64_t> inverse(const WeightLayout& layout);

// The type the weight of `logical` type has after the layout's reshape (`logical` itself when it
// has none): what the transpose of the layout reads.
TensorType reshaped_type(const TensorType& logical, const WeightLayout& layout);

}  // namespace wallsim::compiler_stub
