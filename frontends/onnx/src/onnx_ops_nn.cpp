// Matrix products, normalisations and softmax, reductions, convolution and pooling as graph IR
// ops. Softmax on any axis is transpose + softmax + transpose, a reduction over any axes is
// transpose + reshape + reduce, Conv is im2col + matmul per group (an implicit GEMM), pooling is
// im2col + a reduction over the window.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "onnx_build.h"

namespace wallsim::frontends::onnx {
namespace {

using I = Importer;

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

void add_nn_ops(std::map<std::string, OpFn>& table) {
  table.emplace("AveragePool", pool(false));
  table.emplace("BatchNormalization", batch_norm);
  table.emplace("Conv", conv);
  table.emplace("Gemm", gemm);
  table.emplace("GlobalAveragePool", global_pool(OpKind::reduce_mean));
  table.emplace("GlobalMaxPool", global_pool(OpKind::reduce_max));
  table.emplace("InstanceNormalization", instance_norm);
  table.emplace("LayerNormalization", layer_norm);
  table.emplace("LogSoftmax", softmax_op(OpKind::log_softmax));
  table.emplace("MatMul", matmul);
  table.emplace("MaxPool", pool(true));
  table.emplace("ReduceL1", reduce_op(Red::l1));
  table.emplace("ReduceL2", reduce_op(Red::l2));
  table.emplace("ReduceLogSum", reduce_op(Red::log_sum));
  table.emplace("ReduceLogSumExp", reduce_op(Red::log_sum_exp));
  table.emplace("ReduceMax", reduce_op(Red::max));
  table.emplace("ReduceMean", reduce_op(Red::mean));
  table.emplace("ReduceMin", reduce_op(Red::min));
  table.emplace("ReduceSum", reduce_op(Red::sum));
  table.emplace("ReduceSumSquare", reduce_op(Red::sum_square));
  table.emplace("Softmax", softmax_op(OpKind::softmax));
}

}  // namespace wallsim::frontends::onnx
