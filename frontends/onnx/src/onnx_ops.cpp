// The op table: each ONNX op as graph IR ops (or folded to a constant at import when all its
// inputs are constants); this file holds the element-wise ops, the families' files the others
// (onnx_ops_nn.cpp, onnx_ops_shape.cpp, onnx_ops_more.cpp), onnx_build.h what they build with.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "onnx_build.h"

namespace wallsim::frontends::onnx {
namespace {

using I = Importer;

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

}  // namespace

const std::map<std::string, OpFn>& op_table() {
  static const std::map<std::string, OpFn> table = [] {
    std::map<std::string, OpFn> t = {
        {"Add", add_op},
        {"Cast", cast_op},
        {"Celu", celu},
        {"Clip", clip_op},
        {"Div", div_op},
        {"Dropout", identity_op},
        {"Elu", elu},
        {"HardSigmoid", hard_sigmoid},
        {"HardSwish", hard_swish},
        {"Identity", identity_op},
        {"LeakyRelu", leaky_relu},
        {"Max", max_op},
        {"Mean", variadic(OpKind::add, 1)},
        {"Min", min_op},
        {"Mish", mish},
        {"Mul", mul_op},
        {"Neg", neg_op},
        {"Pow", pow_op},
        {"PRelu", prelu},
        {"Selu", selu},
        {"Softplus", softplus_op},
        {"Softsign", softsign},
        {"Sub", sub_op},
        {"Sum", variadic(OpKind::add, 0)},
    };
    // An ONNX op that is one graph op alone: ops.def's onnx column.
    for (int i = 0; i < compiler_stub::kNumOps; ++i) {
      const OpKind op = static_cast<OpKind>(i);
      if (!compiler_stub::info(op).onnx.empty())
        t.emplace(std::string(compiler_stub::info(op).onnx), unary_op(op));
    }
    add_nn_ops(t);     // onnx_ops_nn.cpp
    add_shape_ops(t);  // onnx_ops_shape.cpp
    add_more_ops(t);   // onnx_ops_more.cpp
    return t;
  }();
  return table;
}

}  // namespace wallsim::frontends::onnx
