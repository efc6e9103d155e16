// Shape ops (Reshape, Transpose, Concat, Slice, Split, Gather, Pad, Expand, Tile...) and constant
// makers (Constant, ConstantOfShape, Range, Shape): graph IR views, or folded at import when
// every input is a constant. Padding is a concat with constant blocks.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "onnx_build.h"

namespace wallsim::frontends::onnx {
namespace {

using I = Importer;

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

}  // namespace

void add_shape_ops(std::map<std::string, OpFn>& table) {
  table.emplace("Concat", concat_op);
  table.emplace("Constant", constant);
  table.emplace("ConstantOfShape", constant_of_shape);
  table.emplace("Equal", fold_only("Equal", [](double a, double b) { return double(a == b); }));
  table.emplace("Expand", expand);
  table.emplace("Flatten", flatten);
  table.emplace("Gather", gather);
  table.emplace("Greater", fold_only("Greater", [](double a, double b) { return double(a > b); }));
  table.emplace("Less", fold_only("Less", [](double a, double b) { return double(a < b); }));
  table.emplace("Pad", pad_op);
  table.emplace("Range", range);
  table.emplace("Reshape", reshape_op);
  table.emplace("Shape", shape_op);
  table.emplace("Size", size_op);
  table.emplace("Slice", slice_op);
  table.emplace("Split", split);
  table.emplace("Squeeze", squeeze);
  table.emplace("Tile", tile);
  table.emplace("Transpose", transpose_op);
  table.emplace("Unsqueeze", unsqueeze);
  table.emplace("Where", where);
}

}  // namespace wallsim::frontends::onnx
