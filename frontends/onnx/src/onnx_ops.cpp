// The op table: each ONNX op as graph IR ops (or folded to a constant at import when all its
// inputs are constants). Where an ONNX op has no IR op of its own it is composed exactly from
// others: Softmax on any axis is transpose + softmax + transpose, a reduction over any axes is
// transpose + reshape + reduce, Conv is im2col + matmul per group (an implicit GEMM), pooling is
// im2col + a reduction over the window, padding is a concat with constant blocks.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "onnx_internal.h"

namespace wallsim::frontends::onnx {
namespace {

using Ints = std::vector<int64_t>;
using I = Importer;

// ---- shapes ----------------------------------------------------------------------------------

int64_t norm_axis(I& m, int64_t axis, int64_t rank) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1)) {
    m.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  return a;
}

Shape broadcast_shapes(I& m, const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t x = k < a.size() ? a[a.size() - 1 - k] : 1;
    const int64_t y = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (x != y && x != 1 && y != 1) m.fail("shapes do not broadcast");
    out[out.size() - 1 - k] = x == 1 ? y : x;
  }
  return out;
}

Shape ir_shape(const Shape& s) { return s.empty() ? Shape{1} : s; }

// ---- constants (folding) ---------------------------------------------------------------------

// The flat index into `from` (shape) of output element i of `to` under numpy broadcasting.
int64_t bcast_index(const Shape& from, const Shape& to, int64_t i) {
  int64_t idx = 0, stride = 1;
  for (size_t k = 0; k < to.size(); ++k) {
    const size_t kt = to.size() - 1 - k;
    const int64_t coord = i % to[kt];
    i /= to[kt];
    if (k < from.size()) {
      const int64_t f = from[from.size() - 1 - k];
      if (f != 1) idx += coord * stride;
      stride *= f;
    }
  }
  return idx;
}

template <class F>
Val fold_binary(I& m, const Const& a, const Const& b, int32_t elem, F f) {
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
Const remap(const I& m, const Const& x, Shape shape, F index) {
  Const c;
  c.elem = x.elem;
  c.shape = std::move(shape);
  for (int64_t i = 0, n = folded_count(m, c.shape); i < n; ++i) c.v.push_back(x.v[index(i)]);
  return c;
}

// Multi-index of flat i in `shape`.
Ints unravel(int64_t i, const Shape& shape) {
  Ints idx(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    idx[k] = i % shape[k];
    i /= shape[k];
  }
  return idx;
}

int64_t ravel(const Ints& idx, const Shape& shape) {
  int64_t i = 0;
  for (size_t k = 0; k < shape.size(); ++k) i = i * shape[k] + idx[k];
  return i;
}

bool all_const(I& m) {
  for (size_t i = 0; i < m.num_inputs(); ++i) {
    if (m.has_input(i) && !m.input(i).is_const()) return false;
  }
  return true;
}

Const ints_const(const Ints& v, Shape shape = {}) {
  Const c;
  c.elem = pb::TensorProto::INT64;
  c.shape = shape.empty() ? Shape{static_cast<int64_t>(v.size())} : shape;
  for (int64_t x : v) c.v.push_back(static_cast<double>(x));
  return c;
}

Const filled(const I& m, const Shape& shape, double value) {
  Const c;
  c.shape = shape;
  c.v.assign(static_cast<size_t>(folded_count(m, shape)), value);
  return c;
}

// ---- graph builders --------------------------------------------------------------------------

int32_t reshape(I& m, int32_t x, const Shape& shape) {
  const Shape s = ir_shape(shape);
  if (m.shape_of(x) == s) return x;
  return m.emit(OpKind::reshape, {x}, {{"shape", s}});
}

int32_t transpose(I& m, int32_t x, const Ints& perm) {
  bool identity = true;
  for (size_t k = 0; k < perm.size(); ++k) identity = identity && perm[k] == int64_t(k);
  if (identity) return x;
  return m.emit(OpKind::transpose, {x}, {{"perm", perm}});
}

// x broadcast to `shape`: a reshape when only leading 1s differ, else a broadcast view.
int32_t bcast(I& m, int32_t x, const Shape& shape) {
  const Shape s = ir_shape(shape), from = m.shape_of(x);
  if (from == s) return x;
  if (count_of(from) == count_of(s)) return reshape(m, x, s);
  Shape trimmed = from;
  while (trimmed.size() > s.size() && trimmed.front() == 1) trimmed.erase(trimmed.begin());
  if (trimmed.size() > s.size()) m.fail("cannot broadcast");
  if (trimmed != from) x = reshape(m, x, trimmed);
  return m.emit(OpKind::broadcast, {x}, {{"shape", s}});
}

int32_t unary(I& m, OpKind op, int32_t x, std::map<std::string, AttrValue> attrs = {}) {
  return m.emit(op, {x}, std::move(attrs));
}

int32_t affine(I& m, int32_t x, double value, double offset) {
  std::map<std::string, AttrValue> a;
  if (value != 1.0) a["value"] = value;
  if (offset != 0.0) a["offset"] = offset;
  if (a.empty()) return x;
  return m.emit(OpKind::affine, {x}, a);
}

int32_t clip(I& m, int32_t x, std::optional<double> lo, std::optional<double> hi) {
  std::map<std::string, AttrValue> a;
  if (lo) a["lo"] = *lo;
  if (hi) a["hi"] = *hi;
  return m.emit(OpKind::clip, {x}, a);
}

// a <op> b with numpy broadcasting made explicit; a one-element constant operand of add, sub,
// mul or div becomes an immediate.
int32_t binary(I& m, OpKind op, const Val& a, const Val& b) {
  const Shape out = ir_shape(broadcast_shapes(m, m.shape(a), m.shape(b)));
  auto scalar = [&](const Val& v) { return v.is_const() && v.c->count() == 1; };
  if (scalar(b) && ir_shape(m.shape(a)) == out) {
    const double s = b.c->v[0];
    if (op == OpKind::add) return affine(m, m.id(a), 1.0, s);
    if (op == OpKind::sub) return affine(m, m.id(a), 1.0, -s);
    if (op == OpKind::mul) return m.emit(OpKind::scale, {m.id(a)}, {{"value", s}});
    if (op == OpKind::div && s != 0) return m.emit(OpKind::scale, {m.id(a)}, {{"value", 1.0 / s}});
  }
  if (scalar(a) && ir_shape(m.shape(b)) == out) {
    const double s = a.c->v[0];
    if (op == OpKind::add) return affine(m, m.id(b), 1.0, s);
    if (op == OpKind::sub) return affine(m, m.id(b), -1.0, s);
    if (op == OpKind::mul) return m.emit(OpKind::scale, {m.id(b)}, {{"value", s}});
  }
  // The lowering broadcasts a column [.., R, 1] and a row vector [C] itself; anything else is an
  // explicit broadcast view.
  auto operand = [&](const Val& x) {
    const int32_t i = m.id(x);
    const Shape s = m.shape_of(i);
    const bool column = s.size() == out.size() && s.size() >= 2 && s.back() == 1 &&
                        std::equal(s.begin(), s.end() - 1, out.begin());
    const bool row = s.size() == 1 && s[0] == out.back() && out.size() >= 2;
    return column || row ? i : bcast(m, i, out);
  };
  return m.emit(op, {operand(a), operand(b)});
}

int32_t binary(I& m, OpKind op, int32_t a, int32_t b) {
  return binary(m, op, Val{a, nullptr}, Val{b, nullptr});
}

Val v(int32_t id) { return Val{id, nullptr}; }
std::vector<Val> one(int32_t id) { return {v(id)}; }

// The reduction `op` (reduce_sum, reduce_max, reduce_mean) of x over `axes`, keeping them as 1s
// or dropping them.
int32_t reduce(I& m, OpKind op, int32_t x, Ints axes, bool keepdims) {
  const Shape s = m.shape_of(x);
  const int64_t rank = static_cast<int64_t>(s.size());
  for (int64_t& a : axes) a = norm_axis(m, a, rank);
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  Ints perm, kept_shape, out_shape;
  int64_t inner = 1;
  for (int64_t k = 0; k < rank; ++k) {
    const bool reduced = std::binary_search(axes.begin(), axes.end(), k);
    if (!reduced) {
      perm.push_back(k);
      kept_shape.push_back(s[k]);
    }
    if (!reduced || keepdims) out_shape.push_back(reduced ? 1 : s[k]);
  }
  for (int64_t a : axes) {
    perm.push_back(a);
    inner *= s[a];
  }
  int32_t t = transpose(m, x, perm);
  Shape flat = kept_shape;
  flat.push_back(inner);
  t = reshape(m, t, flat);
  t = m.emit(op, {t});
  return reshape(m, t, out_shape);
}

// Moves `axis` last, applies f, moves it back.
template <class F>
int32_t on_last_axis(I& m, int32_t x, int64_t axis, F f) {
  const int64_t rank = static_cast<int64_t>(m.shape_of(x).size());
  axis = norm_axis(m, axis, rank);
  Ints perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[axis], perm[rank - 1]);
  return transpose(m, f(transpose(m, x, perm)), perm);
}

// Slice [start, limit) of one axis (an identity when it covers the axis).
int32_t slice(I& m, int32_t x, int64_t axis, int64_t start, int64_t limit) {
  if (start == 0 && limit == m.shape_of(x)[axis]) return x;
  return m.emit(OpKind::slice, {x}, {{"axis", axis}, {"start", start}, {"limit", limit}});
}

int32_t concat(I& m, std::vector<int32_t> xs, int64_t axis) {
  while (xs.size() > 16) {  // the IR's concat takes at most 16 inputs
    std::vector<int32_t> head(xs.begin(), xs.begin() + 16);
    xs.erase(xs.begin(), xs.begin() + 16);
    xs.insert(xs.begin(), m.emit(OpKind::concat, head, {{"axis", axis}}));
  }
  if (xs.size() == 1) return xs[0];
  return m.emit(OpKind::concat, xs, {{"axis", axis}});
}

// x padded with `value` by begin[k], end[k] along each axis k.
int32_t pad(I& m, int32_t x, const Ints& begin, const Ints& end, double value) {
  for (size_t k = 0; k < begin.size(); ++k) {
    if (begin[k] < 0 || end[k] < 0) m.fail("negative pads are not supported");
    if (!begin[k] && !end[k]) continue;
    Shape s = m.shape_of(x);
    std::vector<int32_t> parts;
    auto block = [&](int64_t n) {
      Shape b = s;
      b[k] = n;
      return m.id(m.konst(filled(m, b, value)));
    };
    if (begin[k]) parts.push_back(block(begin[k]));
    parts.push_back(x);
    if (end[k]) parts.push_back(block(end[k]));
    x = concat(m, parts, static_cast<int64_t>(k));
  }
  return x;
}

// ---- element-wise ops ------------------------------------------------------------------------

OpFn unary_op(OpKind op) {
  return [op](I& m) { return one(unary(m, op, m.id(m.input(0)))); };
}

template <class F>
Val fold_or(I& m, OpKind op, F f) {
  Val a = m.input(0), b = m.input(1);
  if (a.is_const() && b.is_const()) {
    const int32_t elem = is_float_elem(a.c->elem) ? a.c->elem : b.c->elem;
    return fold_binary(m, *a.c, *b.c, elem, f);
  }
  return v(binary(m, op, a, b));
}

std::vector<Val> add_op(I& m) { return {fold_or(m, OpKind::add, std::plus<double>())}; }
std::vector<Val> sub_op(I& m) { return {fold_or(m, OpKind::sub, std::minus<double>())}; }
std::vector<Val> mul_op(I& m) { return {fold_or(m, OpKind::mul, std::multiplies<double>())}; }
std::vector<Val> div_op(I& m) {
  Val a = m.input(0), b = m.input(1);
  if (a.is_const() && b.is_const() && is_int_elem(a.c->elem)) {
    return {fold_binary(m, *a.c, *b.c, a.c->elem,
                        [](double x, double y) { return y ? std::trunc(x / y) : 0.0; })};
  }
  return {fold_or(m, OpKind::div, std::divides<double>())};
}

// Sum, Max, Min, Mean of any number of inputs.
OpFn variadic(OpKind op, double mean) {
  return [op, mean](I& m) {
    int32_t acc = m.id(m.input(0));
    for (size_t i = 1; i < m.num_inputs(); ++i) acc = binary(m, op, v(acc), m.input(i));
    if (mean && m.num_inputs() > 1) {
      acc = m.emit(OpKind::scale, {acc}, {{"value", 1.0 / double(m.num_inputs())}});
    } else if (m.num_inputs() == 1) {
      acc = reshape(m, acc, m.shape_of(acc));
    }
    return one(acc);
  };
}

std::vector<Val> max_op(I& m) {
  if (all_const(m) && m.num_inputs() == 2) {
    return {fold_binary(m, m.const_input(0, ""), m.const_input(1, ""), m.const_input(0, "").elem,
                        [](double a, double b) { return std::max(a, b); })};
  }
  return variadic(OpKind::maximum, 0)(m);
}

std::vector<Val> min_op(I& m) {
  if (all_const(m) && m.num_inputs() == 2) {
    return {fold_binary(m, m.const_input(0, ""), m.const_input(1, ""), m.const_input(0, "").elem,
                        [](double a, double b) { return std::min(a, b); })};
  }
  return variadic(OpKind::minimum, 0)(m);
}

std::vector<Val> pow_op(I& m) {
  Val y = m.input(1);
  if (!y.is_const() || y.c->count() != 1) m.fail("Pow needs a constant scalar exponent");
  const double e = y.c->v[0];
  const int32_t x = m.id(m.input(0));
  if (e == 1) return one(reshape(m, x, m.shape_of(x)));
  if (e == 2) return one(m.emit(OpKind::mul, {x, x}));
  if (e == 3) return one(m.emit(OpKind::mul, {m.emit(OpKind::mul, {x, x}), x}));
  if (e == 0.5) return one(unary(m, OpKind::sqrt, x));
  if (e == -1) return one(unary(m, OpKind::reciprocal, x));
  m.fail("Pow with exponent " + std::to_string(e) + " is not supported (1, 2, 3, 0.5, -1 are)");
}

std::vector<Val> neg_op(I& m) {
  Val x = m.input(0);
  if (x.is_const()) {
    Const c = *x.c;
    for (double& d : c.v) d = -d;
    return {m.konst(c)};
  }
  return one(m.emit(OpKind::scale, {m.id(x)}, {{"value", -1.0}}));
}

std::vector<Val> identity_op(I& m) {
  if (m.node().output_size() > 1 && !m.node().output(1).empty()) {
    m.fail("the mask output of Dropout is not supported");
  }
  if (m.has_input(2)) {
    Val t = m.input(2);
    if (!t.is_const() || (t.c->count() && t.c->v[0] != 0)) m.fail("training mode is not supported");
  }
  return {m.input(0)};
}

std::vector<Val> cast_op(I& m) {
  Val x = m.input(0);
  const int64_t to = m.required_attr_int("to");
  if (x.is_const()) {
    Const c = *x.c;
    c.elem = static_cast<int32_t>(to);
    if (is_int_elem(c.elem)) {
      for (double& d : c.v) d = c.elem == pb::TensorProto::BOOL ? (d != 0) : std::trunc(d);
    }
    return {m.konst(c)};
  }
  if (to == pb::TensorProto::FLOAT) {
    if (m.dtype_of(x.id) == isa::DType::fp32) return {x};
    // int32 (an integer input) to float: a copy whose output is fp32.
    return one(m.emit(OpKind::scale, {x.id}, {{"value", 1.0}}, isa::DType::fp32));
  }
  m.fail("Cast to " + elem_name(static_cast<int32_t>(to)) + " is not supported (float is)");
}

std::vector<Val> leaky_relu(I& m) {
  const double alpha = m.attr_float("alpha", 0.01);
  const int32_t x = m.id(m.input(0));
  const int32_t neg = m.emit(OpKind::scale, {clip(m, x, std::nullopt, 0.0)}, {{"value", alpha}});
  return one(m.emit(OpKind::add, {unary(m, OpKind::relu, x), neg}));
}

// alpha * (exp(min(x, 0)) - 1) + max(x, 0), times gamma (Selu).
int32_t elu_like(I& m, int32_t x, double alpha, double gamma) {
  const int32_t e = unary(m, OpKind::exp, clip(m, x, std::nullopt, 0.0));
  int32_t y = m.emit(OpKind::add, {unary(m, OpKind::relu, x), affine(m, e, alpha, -alpha)});
  return gamma == 1.0 ? y : m.emit(OpKind::scale, {y}, {{"value", gamma}});
}

std::vector<Val> elu(I& m) {
  return one(elu_like(m, m.id(m.input(0)), m.attr_float("alpha", 1), 1));
}
std::vector<Val> selu(I& m) {
  return one(elu_like(m, m.id(m.input(0)), m.attr_float("alpha", 1.67326319217681884765625),
                      m.attr_float("gamma", 1.05070102214813232421875)));
}

std::vector<Val> celu(I& m) {
  const double alpha = m.attr_float("alpha", 1);
  const int32_t x = m.id(m.input(0));
  const int32_t e = unary(m, OpKind::exp, m.emit(OpKind::scale, {x}, {{"value", 1.0 / alpha}}));
  const int32_t neg = clip(m, affine(m, e, alpha, -alpha), std::nullopt, 0.0);
  return one(m.emit(OpKind::add, {unary(m, OpKind::relu, x), neg}));
}

int32_t softplus(I& m, int32_t x) {
  return unary(m, OpKind::log, affine(m, unary(m, OpKind::exp, x), 1, 1));
}

std::vector<Val> softplus_op(I& m) { return one(softplus(m, m.id(m.input(0)))); }
std::vector<Val> softsign(I& m) {
  const int32_t x = m.id(m.input(0));
  return one(m.emit(OpKind::div, {x, affine(m, unary(m, OpKind::abs, x), 1, 1)}));
}
std::vector<Val> mish(I& m) {
  const int32_t x = m.id(m.input(0));
  return one(m.emit(OpKind::mul, {x, unary(m, OpKind::tanh, softplus(m, x))}));
}

std::vector<Val> hard_sigmoid(I& m) {
  const int32_t x = m.id(m.input(0));
  return one(
      clip(m, affine(m, x, m.attr_float("alpha", 0.2), m.attr_float("beta", 0.5)), 0.0, 1.0));
}

std::vector<Val> hard_swish(I& m) {
  const int32_t x = m.id(m.input(0));
  return one(m.emit(OpKind::mul, {x, clip(m, affine(m, x, 1.0 / 6.0, 0.5), 0.0, 1.0)}));
}

std::vector<Val> clip_op(I& m) {
  std::optional<double> lo, hi;
  if (m.opset() < 11) {
    if (m.attr("min")) lo = m.attr_float("min", 0);
    if (m.attr("max")) hi = m.attr_float("max", 0);
  } else {
    if (m.has_input(1)) lo = m.const_input(1, "Clip's min").v.at(0);
    if (m.has_input(2)) hi = m.const_input(2, "Clip's max").v.at(0);
  }
  const int32_t x = m.id(m.input(0));
  if (!lo && !hi) return one(reshape(m, x, m.shape_of(x)));
  return one(clip(m, x, lo, hi));
}

std::vector<Val> prelu(I& m) {
  const int32_t x = m.id(m.input(0));
  const int32_t neg = binary(m, OpKind::mul, v(clip(m, x, std::nullopt, 0.0)), m.input(1));
  return one(m.emit(OpKind::add, {unary(m, OpKind::relu, x), neg}));
}

// ---- matrix ops ------------------------------------------------------------------------------

std::vector<Val> gemm(I& m) {
  int32_t a = m.id(m.input(0)), b = m.id(m.input(1));
  if (m.shape_of(a).size() != 2 || m.shape_of(b).size() != 2) m.fail("Gemm needs 2-D A and B");
  if (m.attr_int("transA", 0)) a = transpose(m, a, {1, 0});
  if (m.attr_int("transB", 0)) b = transpose(m, b, {1, 0});
  int32_t y = m.emit(OpKind::matmul, {a, b});
  const double alpha = m.attr_float("alpha", 1), beta = m.attr_float("beta", 1);
  if (alpha != 1) y = m.emit(OpKind::scale, {y}, {{"value", alpha}});
  if (m.has_input(2) && beta != 0) {
    int32_t c = m.id(m.input(2));
    if (beta != 1) c = m.emit(OpKind::scale, {c}, {{"value", beta}});
    y = binary(m, OpKind::add, y, c);
  }
  return one(y);
}

std::vector<Val> matmul(I& m) {
  int32_t a = m.id(m.input(0)), b = m.id(m.input(1));
  Shape sa = m.shape_of(a), sb = m.shape_of(b);
  const bool vec_a = sa.size() == 1, vec_b = sb.size() == 1;
  if (vec_a) sa.insert(sa.begin(), 1), a = reshape(m, a, sa);
  if (vec_b) sb.push_back(1), b = reshape(m, b, sb);
  const int64_t M = sa[sa.size() - 2], K = sa.back(), N = sb.back();
  if (sb[sb.size() - 2] != K) m.fail("K mismatch");
  Shape batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  Shape out;
  int32_t y;
  if (batch_b.empty() || count_of(batch_b) == 1) {
    b = reshape(m, b, {K, N});
    y = m.emit(OpKind::matmul, {a, b});
    out = batch_a;
  } else {
    out = broadcast_shapes(m, batch_a, batch_b);
    const int64_t B = count_of(out);
    Shape full_a = out, full_b = out;
    full_a.insert(full_a.end(), {M, K});
    full_b.insert(full_b.end(), {K, N});
    a = reshape(m, bcast(m, a, full_a), {B, M, K});
    b = reshape(m, bcast(m, b, full_b), {B, K, N});
    y = m.emit(OpKind::batch_matmul, {a, b});
  }
  if (!vec_a) out.push_back(M);
  if (!vec_b) out.push_back(N);
  return one(reshape(m, y, out));
}

// ---- normalisations and softmax --------------------------------------------------------------

OpFn softmax_op(OpKind op) {
  return [op](I& m) {
    const int32_t x = m.id(m.input(0));
    const Shape s = m.shape_of(x);
    const int64_t rank = static_cast<int64_t>(s.size());
    if (m.opset() < 13) {  // the input coerced to 2-D at `axis`
      const int64_t axis = norm_axis(m, m.attr_int("axis", 1), rank);
      const int64_t outer = count_of(Shape(s.begin(), s.begin() + axis));
      const int32_t t = m.emit(op, {reshape(m, x, {outer, count_of(s) / outer})});
      return one(reshape(m, t, s));
    }
    return one(
        on_last_axis(m, x, m.attr_int("axis", -1), [&](int32_t t) { return m.emit(op, {t}); }));
  };
}

// [C] parameters of channel-first x [N, C, ...] as [1, C, 1, ...] broadcast to x.
int32_t per_channel(I& m, const Val& p, const Shape& xs) {
  Shape s(xs.size(), 1);
  s[1] = xs[1];
  return bcast(m, reshape(m, m.id(p), s), xs);
}

std::vector<Val> batch_norm(I& m) {
  if (m.attr_int("training_mode", 0)) m.fail("training mode is not supported");
  for (int k = 1; k < m.node().output_size(); ++k) {
    if (!m.node().output(k).empty())
      m.fail("training outputs (running mean, var) are not supported");
  }
  const int32_t x = m.id(m.input(0));
  const Shape s = m.shape_of(x);
  if (s.size() < 2) m.fail("BatchNormalization needs [N, C, ...]");
  const double eps = m.attr_float("epsilon", 1e-5);
  // (x - mean) / sqrt(var + eps) * scale + B, as ONNX's reference computes it.
  const int32_t centred = m.emit(OpKind::sub, {x, per_channel(m, m.input(3), s)});
  const int32_t sd = unary(m, OpKind::sqrt, affine(m, m.id(m.input(4)), 1, eps));
  Shape cs(s.size(), 1);
  cs[1] = s[1];
  int32_t y = m.emit(OpKind::div, {centred, bcast(m, reshape(m, sd, cs), s)});
  y = m.emit(OpKind::mul, {y, per_channel(m, m.input(1), s)});
  return one(m.emit(OpKind::add, {y, per_channel(m, m.input(2), s)}));
}

// layernorm of x viewed as [outer, inner] with gamma, beta [inner].
int32_t layernorm_2d(I& m, int32_t x, int64_t axis, const Val* gamma, const Val* beta, double eps) {
  const Shape s = m.shape_of(x);
  const Shape tail(s.begin() + axis, s.end());
  const int64_t inner = count_of(tail), outer = count_of(s) / inner;
  auto param = [&](const Val* p, double fill) {
    if (!p) return m.id(m.konst(filled(m, {inner}, fill)));
    return reshape(m, bcast(m, m.id(*p), tail), {inner});
  };
  const int32_t g = param(gamma, 1.0), b = param(beta, 0.0);
  const int32_t y =
      m.emit(OpKind::layernorm, {reshape(m, x, {outer, inner}), g, b}, {{"eps", eps}});
  return reshape(m, y, s);
}

std::vector<Val> layer_norm(I& m) {
  const int32_t x = m.id(m.input(0));
  const Shape s = m.shape_of(x);
  const int64_t axis = norm_axis(m, m.attr_int("axis", -1), int64_t(s.size()));
  const double eps = m.attr_float("epsilon", 1e-5);
  Val gamma = m.input(1);
  Val beta = m.has_input(2) ? m.input(2) : Val{};
  std::vector<Val> out =
      one(layernorm_2d(m, x, axis, &gamma, m.has_input(2) ? &beta : nullptr, eps));
  if (m.node().output_size() > 1) {
    // Mean and 1 / sqrt(var + eps) over the normalised axes, kept as 1s.
    Ints axes;
    for (int64_t k = axis; k < int64_t(s.size()); ++k) axes.push_back(k);
    const int32_t mean = reduce(m, OpKind::reduce_mean, x, axes, true);
    const int32_t centred = binary(m, OpKind::sub, x, mean);
    const int32_t var =
        reduce(m, OpKind::reduce_mean, m.emit(OpKind::mul, {centred, centred}), axes, true);
    out.push_back(v(mean));
    out.push_back(v(unary(m, OpKind::rsqrt, affine(m, var, 1, eps))));
  }
  return out;
}

std::vector<Val> instance_norm(I& m) {
  const int32_t x = m.id(m.input(0));
  const Shape s = m.shape_of(x);
  if (s.size() < 3) m.fail("InstanceNormalization needs [N, C, D...]");
  const int32_t n = layernorm_2d(m, x, 2, nullptr, nullptr, m.attr_float("epsilon", 1e-5));
  const int32_t y = m.emit(OpKind::mul, {n, per_channel(m, m.input(1), s)});
  return one(m.emit(OpKind::add, {y, per_channel(m, m.input(2), s)}));
}

// ---- reductions ------------------------------------------------------------------------------

enum class Red { sum, mean, max, min, sum_square, l1, l2, log_sum, log_sum_exp };

OpFn reduce_op(Red kind) {
  return [kind](I& m) {
    int32_t x = m.id(m.input(0));
    const int64_t rank = static_cast<int64_t>(m.shape_of(x).size());
    Ints axes;
    bool given = false;
    if (m.has_input(1)) {
      axes = m.ints_input(1, "axes");
      given = true;
    } else if (m.attr("axes")) {
      axes = m.attr_ints("axes", {});
      given = true;
    }
    if (axes.empty()) {
      if (given || m.attr_int("noop_with_empty_axes", 0)) {
        if (m.attr_int("noop_with_empty_axes", 0)) return one(reshape(m, x, m.shape_of(x)));
      }
      axes.resize(static_cast<size_t>(rank));
      std::iota(axes.begin(), axes.end(), 0);
    }
    const bool keep = m.attr_int("keepdims", 1) != 0;
    switch (kind) {
      case Red::sum:
        return one(reduce(m, OpKind::reduce_sum, x, axes, keep));
      case Red::mean:
        return one(reduce(m, OpKind::reduce_mean, x, axes, keep));
      case Red::max:
        return one(reduce(m, OpKind::reduce_max, x, axes, keep));
      case Red::min: {
        const int32_t neg = m.emit(OpKind::scale, {x}, {{"value", -1.0}});
        return one(m.emit(OpKind::scale, {reduce(m, OpKind::reduce_max, neg, axes, keep)},
                          {{"value", -1.0}}));
      }
      case Red::sum_square:
        return one(reduce(m, OpKind::reduce_sum, m.emit(OpKind::mul, {x, x}), axes, keep));
      case Red::l1:
        return one(reduce(m, OpKind::reduce_sum, unary(m, OpKind::abs, x), axes, keep));
      case Red::l2:
        return one(unary(m, OpKind::sqrt,
                         reduce(m, OpKind::reduce_sum, m.emit(OpKind::mul, {x, x}), axes, keep)));
      case Red::log_sum:
        return one(unary(m, OpKind::log, reduce(m, OpKind::reduce_sum, x, axes, keep)));
      case Red::log_sum_exp:
        return one(unary(m, OpKind::log,
                         reduce(m, OpKind::reduce_sum, unary(m, OpKind::exp, x), axes, keep)));
    }
    return one(x);
  };
}

// ---- shape ops (graph or folded) -------------------------------------------------------------

// What Reshape's shape input means for a tensor of shape `in`: 0 copies, -1 is inferred.
Shape resolve_shape(I& m, const Shape& in, Ints to, bool allowzero) {
  int64_t known = 1, infer = -1;
  for (size_t k = 0; k < to.size(); ++k) {
    if (to[k] == 0 && !allowzero) {
      if (k >= in.size()) m.fail("shape copies a dim the input lacks");
      to[k] = in[k];
    }
    if (to[k] == -1) {
      if (infer >= 0) m.fail("shape has two -1 dims");
      infer = static_cast<int64_t>(k);
    } else if (__builtin_mul_overflow(known, to[k], &known)) {
      m.fail("shape has more than 2^63 elements");
    }
  }
  if (infer >= 0) {
    if (known == 0 || count_of(in) % known) m.fail("cannot infer the -1 dim");
    to[infer] = count_of(in) / known;
  }
  if (count_of(to) != count_of(in)) m.fail("reshape changes the element count");
  return to;
}

std::vector<Val> as_shape(I& m, const Shape& s) {
  Val x = m.input(0);
  if (x.is_const()) {
    Const c = *x.c;
    c.shape = s;
    return {m.konst(c)};
  }
  return one(reshape(m, x.id, s));
}

std::vector<Val> reshape_op(I& m) {
  Ints to = m.opset() < 5 ? m.attr_ints("shape", {}) : m.ints_input(1, "Reshape's shape");
  return as_shape(m, resolve_shape(m, m.shape(m.input(0)), to, m.attr_int("allowzero", 0)));
}

std::vector<Val> flatten(I& m) {
  const Shape s = m.shape(m.input(0));
  const int64_t rank = static_cast<int64_t>(s.size());
  int64_t axis = m.attr_int("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) m.fail("axis out of range");
  const int64_t outer = count_of(Shape(s.begin(), s.begin() + axis));
  return as_shape(m, {outer, count_of(s) / std::max<int64_t>(outer, 1)});
}

Ints axes_of(I& m, const char* what) {
  if (m.opset() >= 13) return m.has_input(1) ? m.ints_input(1, what) : Ints{};
  return m.attr_ints("axes", {});
}

std::vector<Val> squeeze(I& m) {
  const Shape s = m.shape(m.input(0));
  Ints axes = axes_of(m, "Squeeze's axes");
  for (int64_t& a : axes) a = norm_axis(m, a, int64_t(s.size()));
  Shape out;
  for (size_t k = 0; k < s.size(); ++k) {
    const bool listed = std::find(axes.begin(), axes.end(), int64_t(k)) != axes.end();
    if (listed && s[k] != 1) m.fail("cannot squeeze a dim of size " + std::to_string(s[k]));
    if (!(listed || (axes.empty() && s[k] == 1))) out.push_back(s[k]);
  }
  return as_shape(m, out);
}

std::vector<Val> unsqueeze(I& m) {
  const Shape s = m.shape(m.input(0));
  Ints axes = axes_of(m, "Unsqueeze's axes");
  const int64_t rank = static_cast<int64_t>(s.size() + axes.size());
  for (int64_t& a : axes) a = norm_axis(m, a, rank);
  Shape out;
  size_t next = 0;
  for (int64_t k = 0; k < rank; ++k) {
    if (std::find(axes.begin(), axes.end(), k) != axes.end()) {
      out.push_back(1);
    } else {
      if (next >= s.size()) m.fail("bad axes");
      out.push_back(s[next++]);
    }
  }
  return as_shape(m, out);
}

std::vector<Val> transpose_op(I& m) {
  Val x = m.input(0);
  const Shape s = m.shape(x);
  Ints perm = m.attr_ints("perm", {});
  if (perm.empty()) {
    for (size_t k = s.size(); k-- > 0;) perm.push_back(static_cast<int64_t>(k));
  }
  if (perm.size() != s.size()) m.fail("perm does not match the rank");
  if (x.is_const()) {
    Shape out;
    for (int64_t p : perm) out.push_back(s[p]);
    return {m.konst(remap(m, *x.c, out, [&](int64_t i) {
      const Ints o = unravel(i, out);
      Ints idx(s.size());
      for (size_t k = 0; k < perm.size(); ++k) idx[perm[k]] = o[k];
      return ravel(idx, s);
    }))};
  }
  return one(transpose(m, x.id, perm));
}

std::vector<Val> concat_op(I& m) {
  const int64_t rank = static_cast<int64_t>(m.shape(m.input(0)).size());
  const int64_t axis = norm_axis(m, m.required_attr_int("axis"), rank);
  std::vector<Val> ins;
  for (size_t i = 0; i < m.num_inputs(); ++i) {
    if (count_of(m.shape(m.input(i))) > 0) ins.push_back(m.input(i));
  }
  if (ins.empty()) m.fail("all inputs are empty");
  if (all_const(m)) {
    Shape out = m.shape(ins[0]);
    out[axis] = 0;
    for (const Val& x : ins) out[axis] += x.c->shape[axis];
    Const c;
    c.elem = ins[0].c->elem;
    c.shape = out;
    const int64_t outer = count_of(Shape(out.begin(), out.begin() + axis));
    for (int64_t o = 0; o < outer; ++o) {
      for (const Val& x : ins) {
        const int64_t block = x.c->count() / std::max<int64_t>(outer, 1);
        c.v.insert(c.v.end(), x.c->v.begin() + o * block, x.c->v.begin() + (o + 1) * block);
      }
    }
    return {m.konst(c)};
  }
  std::vector<int32_t> ids;
  for (const Val& x : ins) ids.push_back(m.id(x));
  return one(concat(m, ids, axis));
}

std::vector<Val> slice_op(I& m) {
  Val x = m.input(0);
  const Shape s = m.shape(x);
  const int64_t rank = static_cast<int64_t>(s.size());
  Ints starts, ends, axes, steps;
  if (m.opset() < 10) {
    starts = m.attr_ints("starts", {});
    ends = m.attr_ints("ends", {});
    axes = m.attr_ints("axes", {});
  } else {
    starts = m.ints_input(1, "Slice's starts");
    ends = m.ints_input(2, "Slice's ends");
    if (m.has_input(3)) axes = m.ints_input(3, "Slice's axes");
    if (m.has_input(4)) steps = m.ints_input(4, "Slice's steps");
  }
  if (axes.empty()) {
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || ends.size() != starts.size() ||
      steps.size() != starts.size()) {
    m.fail("starts, ends, axes and steps differ in length");
  }
  Ints lo(s.size(), 0), step(s.size(), 1), len(s.begin(), s.end());
  std::vector<bool> seen(s.size(), false);
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t a = norm_axis(m, axes[k], rank), d = s[a];
    if (seen[a]) m.fail("axis " + std::to_string(a) + " is sliced twice");
    seen[a] = true;
    if (steps[k] == 0) m.fail("a step of 0");
    // Beyond any axis' extent a step moves one element: kept where the arithmetic below is exact.
    constexpr int64_t kMaxStep = int64_t{1} << 62;
    if (steps[k] > kMaxStep || steps[k] < -kMaxStep) m.fail("a step beyond +-2^62");
    auto clampv = [&](int64_t i, int64_t low, int64_t high) {
      if (i < -d) return low;  // i + d would be below 0 (and i may be -2^63)
      if (i < 0) i += d;
      return std::min(std::max(i, low), high);
    };
    int64_t b, e, n;
    if (steps[k] > 0) {
      b = clampv(starts[k], 0, d);
      e = clampv(ends[k], 0, d);
      n = e > b ? (e - b + steps[k] - 1) / steps[k] : 0;
    } else {
      b = clampv(starts[k], -1, d - 1);
      e = clampv(ends[k], -1, d - 1);
      n = b > e ? (b - e - steps[k] - 1) / -steps[k] : 0;
    }
    lo[a] = b;
    step[a] = steps[k];
    len[a] = n;
  }
  if (count_of(len) == 0) m.fail("an empty slice is not supported");
  if (x.is_const()) {
    return {m.konst(remap(m, *x.c, len, [&](int64_t i) {
      Ints idx = unravel(i, len);
      for (size_t k = 0; k < idx.size(); ++k) idx[k] = lo[k] + idx[k] * step[k];
      return ravel(idx, s);
    }))};
  }
  int32_t y = x.id;
  for (int64_t a = 0; a < rank; ++a) {
    if (step[a] == 1) {
      y = slice(m, y, a, lo[a], lo[a] + len[a]);
      continue;
    }
    // Any other step: one single-element slice per kept index, joined.
    std::vector<int32_t> parts;
    for (int64_t j = 0; j < len[a]; ++j) {
      const int64_t at = lo[a] + j * step[a];
      parts.push_back(slice(m, y, a, at, at + 1));
    }
    y = concat(m, parts, a);
  }
  return one(y);
}

std::vector<Val> split(I& m) {
  Val x = m.input(0);
  const Shape s = m.shape(x);
  const int64_t axis = norm_axis(m, m.attr_int("axis", 0), int64_t(s.size()));
  Ints sizes = m.opset() >= 13 && m.has_input(1) ? m.ints_input(1, "Split's split")
                                                 : m.attr_ints("split", {});
  const int64_t n = m.node().output_size();
  if (sizes.empty()) {
    if (s[axis] % n) m.fail("the axis does not split evenly");
    sizes.assign(static_cast<size_t>(n), s[axis] / n);
  }
  if (static_cast<int64_t>(sizes.size()) != n) {
    m.fail(std::to_string(sizes.size()) + " split sizes for " + std::to_string(n) + " outputs");
  }
  int64_t total = 0;
  for (int64_t len : sizes) {
    if (len < 0 || len > s[axis] - total) m.fail("the split sizes exceed the axis' extent");
    total += len;
  }
  if (total != s[axis]) m.fail("the split sizes add up to less than the axis' extent");
  std::vector<Val> out;
  int64_t at = 0;
  const int32_t xi = m.id(x);
  for (int64_t len : sizes) {
    if (len <= 0) m.fail("an empty split is not supported");
    out.push_back(
        v(m.emit(OpKind::slice, {xi}, {{"axis", axis}, {"start", at}, {"limit", at + len}})));
    at += len;
  }
  return out;
}

std::vector<Val> gather(I& m) {
  Val data = m.input(0), ind = m.input(1);
  const Shape ds = m.shape(data), is = m.shape(ind);
  const int64_t axis = norm_axis(m, m.attr_int("axis", 0), int64_t(ds.size()));
  Shape out(ds.begin(), ds.begin() + axis);
  out.insert(out.end(), is.begin(), is.end());
  out.insert(out.end(), ds.begin() + axis + 1, ds.end());
  if (ind.is_const() ? !is_int_elem(ind.c->elem) : m.dtype_of(ind.id) != isa::DType::int32)
    m.fail("indices must be integers");
  if (ind.is_const()) {
    Ints idx;
    for (double d : ind.c->v) {
      int64_t i = static_cast<int64_t>(d);
      if (i < 0) i += ds[axis];
      if (i < 0 || i >= ds[axis])
        m.fail("index " + std::to_string(int64_t(d)) + " is out of range");
      idx.push_back(i);
    }
    if (data.is_const()) {
      return {m.konst(remap(m, *data.c, out, [&](int64_t i) {
        const Ints o = unravel(i, out);
        Ints src(o.begin(), o.begin() + axis);
        Ints ii(o.begin() + axis, o.begin() + axis + int64_t(is.size()));
        src.push_back(idx[static_cast<size_t>(ravel(ii, is))]);
        src.insert(src.end(), o.begin() + axis + int64_t(is.size()), o.end());
        return ravel(src, ds);
      }))};
    }
    std::vector<int32_t> parts;
    const int32_t d = m.id(data);
    for (int64_t i : idx) parts.push_back(slice(m, d, axis, i, i + 1));
    return one(reshape(m, concat(m, parts, axis), out));
  }
  // Indices computed at run time: an embedding of rows of axis 0.
  if (axis != 0)
    m.fail("Gather of run-time indices along axis " + std::to_string(axis) +
           " is not supported (axis 0 is)");
  const int64_t rest = count_of(ds) / ds[0];
  const int32_t table = reshape(m, m.id(data), {ds[0], rest});
  // The ids must lie in [0, V): negative ids (counted from the end in ONNX) are not wrapped,
  // since the chip's gather takes its ids straight from an input tensor.
  const int32_t y = m.emit(OpKind::embedding, {table, m.id(ind)});
  return one(reshape(m, y, out));
}

std::vector<Val> expand(I& m) {
  Val x = m.input(0);
  const Shape out = broadcast_shapes(m, m.shape(x), m.ints_input(1, "Expand's shape"));
  if (x.is_const()) {
    return {
        m.konst(remap(m, *x.c, out, [&](int64_t i) { return bcast_index(x.c->shape, out, i); }))};
  }
  const int32_t xi = x.id;
  if (ir_shape(out) == m.shape_of(xi)) return one(reshape(m, xi, out));
  return one(bcast(m, xi, out));
}

std::vector<Val> tile(I& m) {
  Val x = m.input(0);
  const Shape s = m.shape(x);
  const Ints reps = m.ints_input(1, "Tile's repeats");
  if (reps.size() != s.size()) m.fail("repeats do not match the rank");
  Shape split, wide, out;
  for (size_t k = 0; k < s.size(); ++k) {
    split.insert(split.end(), {1, s[k]});
    wide.insert(wide.end(), {reps[k], s[k]});
    out.push_back(reps[k] * s[k]);
  }
  const int32_t xi = m.id(x);
  return one(reshape(m, bcast(m, reshape(m, xi, split), wide), out));
}

std::vector<Val> pad_op(I& m) {
  const std::string mode = m.attr_str("mode", "constant");
  if (mode != "constant") m.fail("pad mode '" + mode + "' is not supported (constant is)");
  Ints pads;
  double value = 0;
  if (m.opset() < 11) {
    pads = m.attr_ints("pads", {});
    value = m.attr_float("value", 0);
  } else {
    pads = m.ints_input(1, "Pad's pads");
    if (m.has_input(2)) value = m.const_input(2, "Pad's constant_value").v.at(0);
    if (m.has_input(3)) m.fail("Pad's axes input is not supported");
  }
  const int32_t x = m.id(m.input(0));
  const size_t r = m.shape_of(x).size();
  if (pads.size() != 2 * r) m.fail("pads must hold 2 x rank values");
  return one(
      pad(m, x, Ints(pads.begin(), pads.begin() + r), Ints(pads.begin() + r, pads.end()), value));
}

std::vector<Val> shape_op(I& m) {
  const Shape s = m.shape(m.input(0));
  const int64_t r = static_cast<int64_t>(s.size());
  int64_t start = m.attr_int("start", 0), end = m.attr_int("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, start, r);
  return {m.konst(ints_const(Ints(s.begin() + start, s.begin() + end)))};
}

std::vector<Val> size_op(I& m) {
  return {m.konst(ints_const({count_of(m.shape(m.input(0)))}, Shape{}))};
}

Const attr_tensor(I& m, const pb::AttributeProto& a) {
  return const_from_proto(a.t(), "attribute '" + a.name() + "'");
}

std::vector<Val> constant(I& m) {
  if (m.node().attribute_size() != 1) m.fail("a Constant takes exactly one value attribute");
  if (const auto* a = m.attr("value")) return {m.konst(attr_tensor(m, *a))};
  if (const auto* a = m.attr("value_float")) {
    Const c;
    c.v = {a->f()};
    return {m.konst(c)};
  }
  if (const auto* a = m.attr("value_floats")) {
    Const c;
    c.v.assign(a->floats().begin(), a->floats().end());
    c.shape = {static_cast<int64_t>(c.v.size())};
    return {m.konst(c)};
  }
  if (const auto* a = m.attr("value_int")) return {m.konst(ints_const({a->i()}, Shape{}))};
  if (const auto* a = m.attr("value_ints"))
    return {m.konst(ints_const({a->ints().begin(), a->ints().end()}))};
  m.fail("only tensor, float(s) and int(s) values are supported");
}

std::vector<Val> constant_of_shape(I& m) {
  const Ints s = m.ints_input(0, "ConstantOfShape's shape");
  Const c;
  if (const auto* a = m.attr("value")) {
    Const v = attr_tensor(m, *a);
    c.elem = v.elem;
    c = filled(m, s, v.v.at(0));
    c.elem = v.elem;
  } else {
    c = filled(m, s, 0.0);
  }
  return {m.konst(c)};
}

std::vector<Val> range(I& m) {
  if (!all_const(m)) m.fail("Range of run-time values is not supported");
  const Const& st = m.const_input(0, "");
  const double start = st.v.at(0), limit = m.const_input(1, "").v.at(0),
               delta = m.const_input(2, "").v.at(0);
  if (delta == 0 || !std::isfinite(delta)) m.fail("delta must be finite and not 0");
  if (!std::isfinite(start) || !std::isfinite(limit)) m.fail("start and limit must be finite");
  const double count = std::max(0.0, std::ceil((limit - start) / delta));
  const int64_t n = count > double(kMaxFoldedElements) ? kMaxFoldedElements + 1 : int64_t(count);
  folded_count(m, {n});
  Const c;
  c.elem = st.elem;
  c.shape = {n};
  for (int64_t i = 0; i < n; ++i) c.v.push_back(start + double(i) * delta);
  return {m.konst(c)};
}

// Comparisons and Where: folded when constant (bool tensors are not graph values).
template <class F>
OpFn fold_only(const char* what, F f) {
  return [what, f](I& m) -> std::vector<Val> {
    if (!all_const(m))
      m.fail(std::string(what) + " of run-time values is not supported (bool tensors)");
    return {fold_binary(m, m.const_input(0, ""), m.const_input(1, ""), pb::TensorProto::BOOL, f)};
  };
}

std::vector<Val> where(I& m) {
  if (!all_const(m)) m.fail("Where of run-time values is not supported (bool tensors)");
  const Const &c = m.const_input(0, ""), &a = m.const_input(1, ""), &b = m.const_input(2, "");
  Shape out = broadcast_shapes(m, broadcast_shapes(m, c.shape, a.shape), b.shape);
  Const r;
  r.elem = a.elem;
  r.shape = out;
  for (int64_t i = 0, n = folded_count(m, out); i < n; ++i) {
    r.v.push_back(c.v[bcast_index(c.shape, out, i)] ? a.v[bcast_index(a.shape, out, i)]
                                                    : b.v[bcast_index(b.shape, out, i)]);
  }
  return {m.konst(r)};
}

// ---- convolution and pooling -----------------------------------------------------------------

struct Window {
  Ints kernel, strides, dilations, begin, end;  // per spatial axis
  Ints out;                                     // output extent per spatial axis
};

// Kernel, strides, dilations and pads of a 1-D or 2-D conv or pool over spatial extents `in`.
Window window(I& m, const Shape& in, Ints kernel, bool ceil_mode) {
  const size_t r = in.size();
  Window w;
  w.kernel = kernel;
  w.strides = m.attr_ints("strides", Ints(r, 1));
  w.dilations = m.attr_ints("dilations", Ints(r, 1));
  Ints pads = m.attr_ints("pads", Ints(2 * r, 0));
  if (w.kernel.size() != r || w.strides.size() != r || w.dilations.size() != r ||
      pads.size() != 2 * r) {
    m.fail("kernel_shape, strides, dilations and pads do not match the spatial rank");
  }
  constexpr int64_t kMaxWindow = int64_t{1} << 31;
  for (size_t a = 0; a < r; ++a) {
    for (int64_t v : {w.kernel[a], w.strides[a], w.dilations[a]}) {
      if (v < 1 || v > kMaxWindow)
        m.fail("kernel_shape, strides and dilations must be in 1..2^31, not " + std::to_string(v));
    }
    for (int64_t v : {pads[a], pads[r + a]}) {
      if (v < 0 || v > kMaxWindow) m.fail("pads must be in 0..2^31, not " + std::to_string(v));
    }
  }
  const std::string auto_pad = m.attr_str("auto_pad", "NOTSET");
  for (size_t a = 0; a < r; ++a) {
    const int64_t span = w.dilations[a] * (w.kernel[a] - 1) + 1;
    int64_t b = pads[a], e = pads[r + a];
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t o = (in[a] + w.strides[a] - 1) / w.strides[a];
      const int64_t total = std::max<int64_t>(0, (o - 1) * w.strides[a] + span - in[a]);
      b = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      e = total - b;
    } else if (auto_pad == "VALID") {
      b = e = 0;
    } else if (auto_pad != "NOTSET") {
      m.fail("auto_pad '" + auto_pad + "' is not supported");
    }
    const int64_t room = in[a] + b + e - span;
    if (room < 0) m.fail("the window is larger than the padded input");
    int64_t o = (ceil_mode ? (room + w.strides[a] - 1) / w.strides[a] : room / w.strides[a]) + 1;
    if (ceil_mode && (o - 1) * w.strides[a] >= in[a] + b) --o;  // no window starts in the end pad
    e += std::max<int64_t>(0, (o - 1) * w.strides[a] + span - (in[a] + b + e));
    w.begin.push_back(b);
    w.end.push_back(e);
    w.out.push_back(o);
  }
  return w;
}

// A 1-D conv or pool input [N, C, L] as [N, C, 1, L] with a 1-row window.
void as_2d(Shape& s, Window& w) {
  if (s.size() == 3) {
    s.insert(s.begin() + 2, 1);
    for (Ints* v : {&w.kernel, &w.strides, &w.dilations, &w.out}) v->insert(v->begin(), 1);
    w.begin.insert(w.begin.begin(), 0);
    w.end.insert(w.end.begin(), 0);
  }
}

int32_t im2col(I& m, int32_t x, const Window& w) {
  return m.emit(OpKind::im2col, {x},
                {{"kernel", w.kernel}, {"strides", w.strides}, {"dilations", w.dilations}});
}

int32_t pad_spatial(I& m, int32_t x, const Window& w, double value) {
  return pad(m, x, {0, 0, w.begin[0], w.begin[1]}, {0, 0, w.end[0], w.end[1]}, value);
}

std::vector<Val> conv(I& m) {
  int32_t x = m.id(m.input(0));
  const Shape xs0 = m.shape_of(x);
  if (xs0.size() != 3 && xs0.size() != 4) m.fail("only 1-D and 2-D convolutions are supported");
  const Shape ws0 = m.shape(m.input(1));
  Window w = window(m, Shape(xs0.begin() + 2, xs0.end()),
                    m.attr_ints("kernel_shape", Ints(ws0.begin() + 2, ws0.end())), false);
  Shape xs = xs0, ws = ws0;
  as_2d(xs, w);
  if (ws.size() == 3) ws.insert(ws.begin() + 2, 1);
  const int64_t N = xs[0], C = xs[1], OC = ws[0], G = m.attr_int("group", 1);
  if (G < 1 || C % G || OC % G || ws[1] != C / G) m.fail("channels do not match the groups");
  const int64_t Cg = C / G, OCg = OC / G, KH = w.kernel[0], KW = w.kernel[1];
  const int64_t OH = w.out[0], OW = w.out[1];
  x = pad_spatial(m, reshape(m, x, xs), w, 0.0);
  const int32_t wt = reshape(m, m.id(m.input(1)), ws);
  int32_t y;
  if (Cg == 1 && OCg == 1) {
    // Depthwise: each channel's window times its kernel, summed (vector engine).
    const Shape cols = {N, C, OH, OW, KH * KW};
    const int32_t patches = reshape(m, im2col(m, x, w), cols);
    const int32_t k = bcast(m, reshape(m, wt, {C, 1, 1, KH * KW}), cols);
    y = reshape(m, m.emit(OpKind::reduce_sum, {m.emit(OpKind::mul, {patches, k})}), {N, C, OH, OW});
  } else {
    // Per group: [N*OH*OW, Cg*KH*KW] windows x [Cg*KH*KW, OCg] kernels on the array.
    std::vector<int32_t> parts;
    for (int64_t g = 0; g < G; ++g) {
      const int32_t xg = slice(m, x, 1, g * Cg, (g + 1) * Cg);
      int32_t a = transpose(m, im2col(m, xg, w), {0, 2, 3, 1, 4, 5});
      a = reshape(m, a, {N * OH * OW, Cg * KH * KW});
      int32_t b = reshape(m, slice(m, wt, 0, g * OCg, (g + 1) * OCg), {OCg, Cg * KH * KW});
      b = transpose(m, b, {1, 0});
      parts.push_back(m.emit(OpKind::matmul, {a, b}));
    }
    y = reshape(m, concat(m, parts, 1), {N, OH, OW, OC});
    y = transpose(m, y, {0, 3, 1, 2});
  }
  if (m.has_input(2)) y = m.emit(OpKind::add, {y, per_channel(m, m.input(2), m.shape_of(y))});
  Shape out(xs0.begin(), xs0.begin() + 2);
  out[1] = OC;
  for (size_t a = xs0.size() == 3 ? 1 : 0; a < 2; ++a) out.push_back(w.out[a]);
  return one(reshape(m, y, out));
}

OpFn pool(bool max) {
  return [max](I& m) -> std::vector<Val> {
    if (m.node().output_size() > 1 && !m.node().output(1).empty())
      m.fail("the Indices output is not supported");
    int32_t x = m.id(m.input(0));
    const Shape xs0 = m.shape_of(x);
    if (xs0.size() != 3 && xs0.size() != 4) m.fail("only 1-D and 2-D pooling is supported");
    const bool ceil_mode = m.attr_int("ceil_mode", 0) != 0;
    const Shape spatial(xs0.begin() + 2, xs0.end());
    Window w = window(m, spatial, m.attr_ints("kernel_shape", {}), ceil_mode);
    Shape xs = xs0;
    as_2d(xs, w);
    const int64_t N = xs[0], C = xs[1], OH = w.out[0], OW = w.out[1], K = w.kernel[0] * w.kernel[1];
    auto nonzero = [](int64_t p) { return p != 0; };
    const bool padded = std::any_of(w.begin.begin(), w.begin.end(), nonzero) ||
                        std::any_of(w.end.begin(), w.end.end(), nonzero);
    if (max && m.attr_int("storage_order", 0)) m.fail("storage_order 1 is not supported");
    x = pad_spatial(m, reshape(m, x, xs), w, max ? -std::numeric_limits<float>::max() : 0.0);
    const int32_t cols = reshape(m, im2col(m, x, w), {N, C, OH, OW, K});
    int32_t y;
    if (max) {
      y = m.emit(OpKind::reduce_max, {cols});
    } else if (!padded || m.attr_int("count_include_pad", 0)) {
      if (ceil_mode && padded) m.fail("ceil_mode with count_include_pad is not supported");
      y = m.emit(OpKind::reduce_mean, {cols});
    } else {
      // Divided by the count of real (unpadded) elements in each window, known at import.
      const int64_t H = xs[2], W = xs[3];
      Const cnt = filled(m, {1, 1, OH, OW}, 0.0);
      for (int64_t oh = 0; oh < OH; ++oh) {
        for (int64_t ow = 0; ow < OW; ++ow) {
          int64_t n = 0;
          for (int64_t kh = 0; kh < w.kernel[0]; ++kh) {
            for (int64_t kw = 0; kw < w.kernel[1]; ++kw) {
              const int64_t h = oh * w.strides[0] + kh * w.dilations[0] - w.begin[0];
              const int64_t c = ow * w.strides[1] + kw * w.dilations[1] - w.begin[1];
              n += h >= 0 && h < H && c >= 0 && c < W;
            }
          }
          cnt.v[static_cast<size_t>(oh * OW + ow)] = double(n);
        }
      }
      const int32_t sum = reshape(m, m.emit(OpKind::reduce_sum, {cols}), {N, C, OH, OW});
      y = m.emit(OpKind::div, {sum, bcast(m, m.id(m.konst(cnt)), {N, C, OH, OW})});
    }
    Shape out(xs0.begin(), xs0.begin() + 2);
    for (size_t a = xs0.size() == 3 ? 1 : 0; a < 2; ++a) out.push_back(w.out[a]);
    return one(reshape(m, y, out));
  };
}

OpFn global_pool(OpKind op) {
  return [op](I& m) {
    const int32_t x = m.id(m.input(0));
    const Shape s = m.shape_of(x);
    if (s.size() < 3) m.fail("global pooling needs [N, C, D...]");
    Ints axes;
    for (size_t k = 2; k < s.size(); ++k) axes.push_back(static_cast<int64_t>(k));
    return one(reduce(m, op, x, axes, true));
  };
}

}  // namespace

const std::map<std::string, OpFn>& op_table() {
  static const std::map<std::string, OpFn> table = [] {
    std::map<std::string, OpFn> t = {
        {"Abs", unary_op(OpKind::abs)},
        {"Add", add_op},
        {"AveragePool", pool(false)},
        {"BatchNormalization", batch_norm},
        {"Cast", cast_op},
        {"Celu", celu},
        {"Clip", clip_op},
        {"Concat", concat_op},
        {"Constant", constant},
        {"ConstantOfShape", constant_of_shape},
        {"Conv", conv},
        {"Div", div_op},
        {"Dropout", identity_op},
        {"Elu", elu},
        {"Equal", fold_only("Equal", [](double a, double b) { return double(a == b); })},
        {"Exp", unary_op(OpKind::exp)},
        {"Expand", expand},
        {"Flatten", flatten},
        {"Gather", gather},
        {"Gemm", gemm},
        {"GlobalAveragePool", global_pool(OpKind::reduce_mean)},
        {"GlobalMaxPool", global_pool(OpKind::reduce_max)},
        {"Greater", fold_only("Greater", [](double a, double b) { return double(a > b); })},
        {"HardSigmoid", hard_sigmoid},
        {"HardSwish", hard_swish},
        {"Identity", identity_op},
        {"InstanceNormalization", instance_norm},
        {"LayerNormalization", layer_norm},
        {"LeakyRelu", leaky_relu},
        {"Less", fold_only("Less", [](double a, double b) { return double(a < b); })},
        {"Log", unary_op(OpKind::log)},
        {"LogSoftmax", softmax_op(OpKind::log_softmax)},
        {"MatMul", matmul},
        {"Max", max_op},
        {"MaxPool", pool(true)},
        {"Mean", variadic(OpKind::add, 1)},
        {"Min", min_op},
        {"Mish", mish},
        {"Mul", mul_op},
        {"Neg", neg_op},
        {"Pad", pad_op},
        {"Pow", pow_op},
        {"PRelu", prelu},
        {"Range", range},
        {"Reciprocal", unary_op(OpKind::reciprocal)},
        {"ReduceL1", reduce_op(Red::l1)},
        {"ReduceL2", reduce_op(Red::l2)},
        {"ReduceLogSum", reduce_op(Red::log_sum)},
        {"ReduceLogSumExp", reduce_op(Red::log_sum_exp)},
        {"ReduceMax", reduce_op(Red::max)},
        {"ReduceMean", reduce_op(Red::mean)},
        {"ReduceMin", reduce_op(Red::min)},
        {"ReduceSum", reduce_op(Red::sum)},
        {"ReduceSumSquare", reduce_op(Red::sum_square)},
        {"Relu", unary_op(OpKind::relu)},
        {"Reshape", reshape_op},
        {"Selu", selu},
        {"Shape", shape_op},
        {"Sigmoid", unary_op(OpKind::sigmoid)},
        {"Size", size_op},
        {"Slice", slice_op},
        {"Softmax", softmax_op(OpKind::softmax)},
        {"Softplus", softplus_op},
        {"Softsign", softsign},
        {"Split", split},
        {"Sqrt", unary_op(OpKind::sqrt)},
        {"Squeeze", squeeze},
        {"Sub", sub_op},
        {"Sum", variadic(OpKind::add, 0)},
        {"Tanh", unary_op(OpKind::tanh)},
        {"Tile", tile},
        {"Transpose", transpose_op},
        {"Unsqueeze", unsqueeze},
        {"Where", where},
    };
    add_more_ops(t);  // onnx_ops_more.cpp
    return t;
  }();
  return table;
}

}  // namespace wallsim::frontends::onnx
