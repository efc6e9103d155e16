// Erf, Resize and LSTM as graph IR ops: Erf through the erf-form gelu activation, Resize as one
// interpolation matrix per resized axis (weights computed at import), LSTM unrolled over its
// sequence into matmuls and element-wise gates.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "onnx_build.h"

namespace wallsim::frontends::onnx {
namespace {

using I = Importer;

// `value` broadcast to `shape` (a one-element constant and a stride-0 view).
int32_t filled_view(I& m, const Shape& shape, double value) {
  Const c;
  c.shape = {1};
  c.v = {value};
  return m.emit(OpKind::broadcast, {m.id(m.konst(std::move(c)))}, {{"shape", shape}});
}

// ---- Erf -------------------------------------------------------------------------------------

// erf(x) = 2 Phi(x sqrt 2) - 1, with the normal CDF Phi(y) = gelu(y) / y (1/2 at y = 0) from
// the erf-form gelu activation (the capture's aten.erf does the same). Absolute error about
// 1e-7 (the rounding of Phi near 1/2).
std::vector<Val> erf_op(I& m) {
  const int32_t x = m.id(m.input(0));
  const Shape s = m.shape_of(x);
  const int32_t y = m.emit(OpKind::scale, {x}, {{"value", std::sqrt(2.0)}});
  const int32_t zero =
      m.emit(OpKind::compare, {y, filled_view(m, s, 0.0)}, {{"cmp", std::string("eq")}});
  const int32_t safe = m.emit(OpKind::select, {zero, filled_view(m, s, 1.0), y});
  const int32_t ratio = m.emit(OpKind::div, {m.emit(OpKind::gelu, {y}), safe});
  const int32_t phi = m.emit(OpKind::select, {zero, filled_view(m, s, 0.5), ratio});
  return {v(m.emit(OpKind::affine, {phi}, {{"value", 2.0}, {"offset", -1.0}}))};
}

// ---- Resize ----------------------------------------------------------------------------------

struct ResizeMode {
  bool linear = false;
  std::string coords;   // asymmetric, half_pixel, align_corners, pytorch_half_pixel
  std::string nearest;  // round_prefer_floor, round_prefer_ceil, floor, ceil
};

// The input coordinate output index o maps to on an axis of `in` -> `out` elements at `scale`.
double source_coord(const ResizeMode& r, int64_t o, int64_t in, int64_t out, double scale) {
  if (r.coords == "align_corners") return out == 1 ? 0.0 : double(o) * double(in - 1) / (out - 1);
  if (r.coords == "asymmetric") return double(o) / scale;
  if (r.coords == "pytorch_half_pixel" && out == 1) return 0.0;
  return (double(o) + 0.5) / scale - 0.5;  // half_pixel, pytorch_half_pixel
}

// W[in, out]: output element o of the axis is sum_i x[i] * W[i, o].
Const interpolation(const ResizeMode& r, int64_t in, int64_t out, double scale) {
  Const w;
  w.shape = {in, out};
  w.v.assign(static_cast<size_t>(in * out), 0.0);
  for (int64_t o = 0; o < out; ++o) {
    const double x = source_coord(r, o, in, out, scale);
    auto at = [&](int64_t i, double weight) {
      w.v[static_cast<size_t>(std::clamp<int64_t>(i, 0, in - 1) * out + o)] += weight;
    };
    if (r.linear) {
      const double c = std::clamp(x, 0.0, double(in - 1));
      const int64_t i0 = static_cast<int64_t>(std::floor(c));
      at(i0, 1.0 - (c - double(i0)));
      at(i0 + 1, c - double(i0));
      continue;
    }
    int64_t i;
    const double f = std::floor(x);
    if (r.nearest == "floor") {
      i = static_cast<int64_t>(f);
    } else if (r.nearest == "ceil") {
      i = static_cast<int64_t>(std::ceil(x));
    } else if (x - f == 0.5) {
      i = static_cast<int64_t>(r.nearest == "round_prefer_ceil" ? f + 1 : f);
    } else {
      i = static_cast<int64_t>(std::round(x));
    }
    at(i, 1.0);
  }
  return w;
}

std::vector<Val> resize(I& m) {
  auto one_of = [&](const std::string& attr, const std::string& value,
                    std::initializer_list<const char*> allowed) {
    for (const char* a : allowed) {
      if (value == a) return;
    }
    std::string list;
    for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    m.fail("Resize's " + attr + " '" + value + "' is not supported (" + list + " are)");
  };
  if (m.opset() < 11) m.fail("Resize before opset 11 is not supported");
  ResizeMode r;
  const std::string mode = m.attr_str("mode", "nearest");
  one_of("mode", mode, {"nearest", "linear"});
  r.linear = mode == "linear";
  r.coords = m.attr_str("coordinate_transformation_mode", "half_pixel");
  one_of("coordinate_transformation_mode", r.coords,
         {"asymmetric", "half_pixel", "align_corners", "pytorch_half_pixel"});
  r.nearest = m.attr_str("nearest_mode", "round_prefer_floor");
  one_of("nearest_mode", r.nearest, {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"});
  if (m.attr_int("exclude_outside", 0)) m.fail("Resize's exclude_outside 1 is not supported");

  int32_t x = m.id(m.input(0));
  const Shape in = m.shape_of(x);
  const size_t rank = in.size();
  // Inputs X, roi, scales, sizes; roi only matters for tf_crop_and_resize.
  const size_t scales_at = 2;
  std::vector<double> scales;
  Shape out = in;
  if (m.has_input(3)) {
    const Ints sizes = m.ints_input(3, "Resize's sizes");
    if (sizes.size() != rank) m.fail("Resize's sizes must hold one value per axis");
    for (size_t k = 0; k < rank; ++k) {
      if (sizes[k] < 1) m.fail("Resize's sizes must be positive");
      out[k] = sizes[k];
      scales.push_back(double(sizes[k]) / double(in[k]));
    }
  } else if (m.has_input(scales_at)) {
    const Const& c = m.const_input(scales_at, "Resize's scales");
    if (c.v.size() != rank) m.fail("Resize's scales must hold one value per axis");
    for (size_t k = 0; k < rank; ++k) {
      if (!(c.v[k] > 0) || !std::isfinite(c.v[k])) m.fail("Resize's scales must be positive");
      scales.push_back(c.v[k]);
      out[k] = static_cast<int64_t>(std::floor(double(in[k]) * c.v[k]));
      if (out[k] < 1) m.fail("Resize's scales leave an axis empty");
    }
  } else {
    m.fail("Resize needs scales or sizes");
  }
  folded_count(m, out);
  // Each resized axis in turn moved last, times its [in, out] interpolation matrix.
  for (size_t k = 0; k < rank; ++k) {
    if (out[k] == in[k] && scales[k] == 1.0) continue;
    Ints perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[k], perm[rank - 1]);
    int32_t t = transpose(m, x, perm);
    const Shape ts = m.shape_of(t);
    const int64_t rows = count_of(ts) / in[k];
    folded_count(m, {in[k], out[k]});
    const int32_t w = m.id(m.konst(interpolation(r, in[k], out[k], scales[k])));
    t = m.emit(OpKind::matmul, {reshape(m, t, {rows, in[k]}), w});
    Shape back = ts;
    back.back() = out[k];
    x = transpose(m, reshape(m, t, back), perm);
  }
  if (x == m.id(m.input(0))) x = m.emit(OpKind::reshape, {x}, {{"shape", in}});
  return {v(x)};
}

// ---- LSTM ------------------------------------------------------------------------------------

// One direction of the LSTM over x [seq, batch, in]: its H for every step, and the last H, C.
struct Direction {
  std::vector<int32_t> hs;
  int32_t h = -1, c = -1;
};

Direction lstm_direction(I& m, int32_t x, int64_t d, int64_t hidden, bool reverse) {
  const Shape xs = m.shape_of(x);
  const int64_t S = xs[0], B = xs[1], IN = xs[2], G = 4 * hidden;
  const int32_t w = reshape(m, slice(m, m.id(m.input(1)), 0, d, d + 1), {G, IN});
  const int32_t r = reshape(m, slice(m, m.id(m.input(2)), 0, d, d + 1), {G, hidden});
  // Every step's input projection in one matmul: [S * B, IN] x W^T + (Wb + Rb).
  int32_t xw = m.emit(OpKind::matmul, {reshape(m, x, {S * B, IN}), transpose(m, w, {1, 0})});
  if (m.has_input(3)) {
    // Wb + Rb: a constant row (folded) the lowering broadcasts itself, else a broadcast view.
    const Val bv = m.input(3);
    int32_t bias;
    if (bv.is_const()) {
      Const sum;
      sum.shape = {G};
      for (int64_t k = 0; k < G; ++k) {
        sum.v.push_back(bv.c->v.at(size_t(d * 2 * G + k)) + bv.c->v.at(size_t(d * 2 * G + G + k)));
      }
      bias = m.id(m.konst(std::move(sum)));
    } else {
      const int32_t b = reshape(m, slice(m, m.id(bv), 0, d, d + 1), {2 * G});
      bias = m.emit(OpKind::add, {slice(m, b, 0, 0, G), slice(m, b, 0, G, 2 * G)});
      bias = m.emit(OpKind::broadcast, {reshape(m, bias, {1, G})}, {{"shape", Shape{S * B, G}}});
    }
    xw = m.emit(OpKind::add, {xw, bias});
  }
  const int32_t rt = transpose(m, r, {1, 0});
  auto initial = [&](size_t i) {
    if (!m.has_input(i)) return -1;
    return reshape(m, slice(m, m.id(m.input(i)), 0, d, d + 1), {B, hidden});
  };
  Direction out;
  out.h = initial(5);
  out.c = initial(6);
  out.hs.assign(static_cast<size_t>(S), -1);
  for (int64_t step = 0; step < S; ++step) {
    const int64_t t = reverse ? S - 1 - step : step;
    int32_t gates = slice(m, xw, 0, t * B, (t + 1) * B);
    if (out.h >= 0) gates = m.emit(OpKind::add, {gates, m.emit(OpKind::matmul, {out.h, rt})});
    auto gate = [&](int64_t k, OpKind act) {
      return m.emit(act, {slice(m, gates, 1, k * hidden, (k + 1) * hidden)});
    };
    // ONNX's gate order: input, output, forget, cell.
    const int32_t i = gate(0, OpKind::sigmoid), o = gate(1, OpKind::sigmoid),
                  f = gate(2, OpKind::sigmoid), c = gate(3, OpKind::tanh);
    const int32_t ic = m.emit(OpKind::mul, {i, c});
    out.c = out.c >= 0 ? m.emit(OpKind::add, {m.emit(OpKind::mul, {f, out.c}), ic}) : ic;
    out.h = m.emit(OpKind::mul, {o, m.emit(OpKind::tanh, {out.c})});
    out.hs[static_cast<size_t>(t)] = out.h;
  }
  return out;
}

std::vector<Val> lstm(I& m) {
  const std::vector<std::string> defaults = {"Sigmoid", "Tanh", "Tanh"};
  if (const auto* a = m.attr("activations")) {
    const int n = a->strings_size();
    for (int k = 0; k < n; ++k) {
      if (a->strings(k) != defaults[static_cast<size_t>(k % 3)])
        m.fail("LSTM activations other than Sigmoid, Tanh, Tanh are not supported");
    }
  }
  if (m.attr("activation_alpha") || m.attr("activation_beta"))
    m.fail("LSTM's activation_alpha and activation_beta are not supported");
  if (m.attr("clip")) m.fail("LSTM's clip is not supported");
  if (m.attr_int("input_forget", 0)) m.fail("LSTM's input_forget 1 is not supported");
  if (m.has_input(7)) m.fail("LSTM's peepholes (input P) are not supported");
  const std::string direction = m.attr_str("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    m.fail("LSTM direction '" + direction + "' is not supported");
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  const int64_t layout = m.attr_int("layout", 0);
  if (layout != 0 && layout != 1) m.fail("LSTM layout must be 0 or 1");
  int32_t x = m.id(m.input(0));
  if (m.shape_of(x).size() != 3) m.fail("LSTM's X must be 3-D");
  if (layout == 1) x = transpose(m, x, {1, 0, 2});
  const Shape xs = m.shape_of(x);
  const int64_t S = xs[0], B = xs[1];
  const Shape ws = m.shape(m.input(1));
  if (ws.size() != 3 || ws[0] != dirs || ws[1] % 4 || ws[2] != xs[2])
    m.fail("LSTM's W must be [num_directions, 4 * hidden_size, input_size]");
  const int64_t hidden = m.attr_int("hidden_size", ws[1] / 4);
  if (hidden * 4 != ws[1]) m.fail("LSTM's hidden_size does not match W");
  if (m.has_input(4)) {
    for (int64_t len : m.ints_input(4, "LSTM's sequence_lens")) {
      if (len != S) m.fail("LSTM's sequence_lens shorter than the sequence are not supported");
    }
  }
  std::vector<int32_t> ys, hs, cs;
  for (int64_t d = 0; d < dirs; ++d) {
    Direction r = lstm_direction(m, x, d, hidden, direction == "reverse" || d == 1);
    for (int32_t& h : r.hs) h = reshape(m, h, {1, 1, B, hidden});
    ys.push_back(concat(m, r.hs, 0));  // [S, 1, B, H]
    hs.push_back(reshape(m, r.h, {1, B, hidden}));
    cs.push_back(reshape(m, r.c, {1, B, hidden}));
  }
  int32_t y = concat(m, ys, 1);  // [S, dirs, B, H]
  int32_t yh = concat(m, hs, 0), yc = concat(m, cs, 0);
  if (layout == 1) {
    y = transpose(m, y, {2, 0, 1, 3});
    yh = transpose(m, yh, {1, 0, 2});
    yc = transpose(m, yc, {1, 0, 2});
  }
  return {v(y), v(yh), v(yc)};
}

}  // namespace

void add_more_ops(std::map<std::string, OpFn>& table) {
  table.emplace("Erf", erf_op);
  table.emplace("LSTM", lstm);
  table.emplace("Resize", resize);
}

}  // namespace wallsim::frontends::onnx
