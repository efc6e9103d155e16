// The builders of onnx_build.h: shapes, constant folding and graph IR builders.
#include "onnx_build.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace wallsim::frontends::onnx {

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

Const ints_const(const Ints& v, Shape shape) {
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

int32_t unary(I& m, OpKind op, int32_t x, std::map<std::string, AttrValue> attrs) {
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

// The reduction `op` (reduce_sum, reduce_max, reduce_mean) of x over `axes` (none: nothing is
// reduced), keeping them as 1s or dropping them: compiler_stub's composite `reduce`.
int32_t reduce(I& m, OpKind op, int32_t x, Ints axes, bool keepdims) {
  const char* reduction = op == OpKind::reduce_sum   ? "sum"
                          : op == OpKind::reduce_max ? "max"
                                                     : "mean";
  return m.emit(OpKind::reduce, {x},
                {{"reduction", std::string(reduction)},
                 {"axes", axes},
                 {"keepdim", int64_t{keepdims ? 1 : 0}}});
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

// x padded with `value` by begin[k], end[k] along each axis k: compiler_stub's composite `pad`.
int32_t pad(I& m, int32_t x, const Ints& begin, const Ints& end, double value) {
  bool any = false;
  for (size_t k = 0; k < begin.size(); ++k) {
    if (begin[k] < 0 || end[k] < 0) m.fail("negative pads are not supported");
    any = any || begin[k] || end[k];
  }
  if (!any) return x;
  if (std::isnan(value)) m.fail("a NaN pad value is not supported");
  const double big = std::numeric_limits<float>::max();
  value = std::max(-big, std::min(big, value));
  std::map<std::string, AttrValue> attrs{{"begin", begin}, {"end", end}};
  if (value != 0.0) attrs["value"] = value;
  return m.emit(OpKind::pad, {x}, std::move(attrs));
}

}  // namespace wallsim::frontends::onnx
