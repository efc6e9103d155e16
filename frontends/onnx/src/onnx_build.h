// What every ONNX op's conversion builds with: axes and broadcast shapes, constant folding
// (element-wise, by index maps), and graph IR builders that skip identities (reshape to the same
// shape, the identity permutation, a slice of a whole axis) and compose what the IR lacks.
#pragma once

#include <numeric>
#include <optional>

#include "onnx_internal.h"

namespace wallsim::frontends::onnx {

using Ints = std::vector<int64_t>;

// ---- shapes ----------------------------------------------------------------------------------

// `axis` counted from the end when negative; fails naming the node when outside [0, rank).
int64_t norm_axis(Importer& m, int64_t axis, int64_t rank);
// numpy broadcasting of two shapes; fails when they do not broadcast.
Shape broadcast_shapes(Importer& m, const Shape& a, const Shape& b);
// The IR has no rank-0 tensors: a scalar is [1].
inline Shape ir_shape(const Shape& s) { return s.empty() ? Shape{1} : s; }

// ---- constants (folding) ---------------------------------------------------------------------

// The flat index into `from` (shape) of output element i of `to` under numpy broadcasting.
int64_t bcast_index(const Shape& from, const Shape& to, int64_t i);
// Multi-index of flat i in `shape`, and back.
Ints unravel(int64_t i, const Shape& shape);
int64_t ravel(const Ints& idx, const Shape& shape);
// Whether every present input of the node is a constant.
bool all_const(Importer& m);
// An int64 constant of `v` (shape [v.size()] unless given).
Const ints_const(const Ints& v, Shape shape = {});
// A float constant of `shape` holding `value` everywhere.
Const filled(const Importer& m, const Shape& shape, double value);

template <class F>
Val fold_binary(Importer& m, const Const& a, const Const& b, int32_t elem, F f) {
  Const c;
  c.elem = elem;
  c.shape = broadcast_shapes(m, a.shape, b.shape);
  const int64_t n = folded_count(m, c.shape);
  for (int64_t i = 0; i < n; ++i) {
    c.v.push_back(f(a.v[bcast_index(a.shape, c.shape, i)], b.v[bcast_index(b.shape, c.shape, i)]));
  }
  return m.konst(std::move(c));
}

// Element i of the result reads element index(i) of `x`.
template <class F>
Const remap(const Importer& m, const Const& x, Shape shape, F index) {
  Const c;
  c.elem = x.elem;
  c.shape = std::move(shape);
  for (int64_t i = 0, n = folded_count(m, c.shape); i < n; ++i) c.v.push_back(x.v[index(i)]);
  return c;
}

// ---- graph builders --------------------------------------------------------------------------

inline Val v(int32_t id) { return Val{id, nullptr}; }
inline std::vector<Val> one(int32_t id) { return {v(id)}; }

int32_t reshape(Importer& m, int32_t x, const Shape& shape);
int32_t transpose(Importer& m, int32_t x, const Ints& perm);
// x broadcast to `shape`: a reshape when only leading 1s differ, else a broadcast view.
int32_t bcast(Importer& m, int32_t x, const Shape& shape);
int32_t unary(Importer& m, OpKind op, int32_t x, std::map<std::string, AttrValue> attrs = {});
// x * value + offset (x itself for 1 and 0).
int32_t affine(Importer& m, int32_t x, double value, double offset);
int32_t clip(Importer& m, int32_t x, std::optional<double> lo, std::optional<double> hi);
// a <op> b with numpy broadcasting made explicit; a one-element constant operand of add, sub,
// mul or div becomes an immediate.
int32_t binary(Importer& m, OpKind op, const Val& a, const Val& b);
int32_t binary(Importer& m, OpKind op, int32_t a, int32_t b);
// The reduction `op` (reduce_sum, reduce_max, reduce_mean) of x over `axes`, keeping them as 1s
// or dropping them.
int32_t reduce(Importer& m, OpKind op, int32_t x, Ints axes, bool keepdims);
// Slice [start, limit) of one axis (an identity when it covers the axis).
int32_t slice(Importer& m, int32_t x, int64_t axis, int64_t start, int64_t limit);
// Concatenation of any number of values (the IR's concat takes at most 16 inputs).
int32_t concat(Importer& m, std::vector<int32_t> xs, int64_t axis);
// x padded with `value` by begin[k], end[k] along each axis k (compiler_stub's composite `pad`;
// an infinite value is taken as the largest finite float of its sign).
int32_t pad(Importer& m, int32_t x, const Ints& begin, const Ints& end, double value);

// Moves `axis` last, applies f, moves it back.
template <class F>
int32_t on_last_axis(Importer& m, int32_t x, int64_t axis, F f) {
  const int64_t rank = static_cast<int64_t>(m.shape_of(x).size());
  axis = norm_axis(m, axis, rank);
  Ints perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[axis], perm[rank - 1]);
  return transpose(m, f(transpose(m, x, perm)), perm);
}

// The families' op tables: onnx_ops.cpp holds the element-wise ops and calls these.
void add_nn_ops(std::map<std::string, OpFn>& table);     // onnx_ops_nn.cpp
void add_shape_ops(std::map<std::string, OpFn>& table);  // onnx_ops_shape.cpp
void add_more_ops(std::map<std::string, OpFn>& table);   // onnx_ops_more.cpp: Erf, LSTM, Resize

}  // namespace wallsim::frontends::onnx
