// The reference evaluator: plain fp32 loops for element-wise and row ops, Eigen for matmuls.
#include "wallsim/compiler_stub/reference.h"

#include <algorithm>
#include <cmath>

#include <Eigen/Core>

#include "wallsim/base/params.h"
#include "wallsim/compiler_stub/composites.h"
#include "wallsim/compiler_stub/validate.h"
#include "wallsim/isa/dtype_convert.h"

namespace wallsim::compiler_stub {
namespace {

using base::InputError;
using Shape = std::vector<int64_t>;
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

std::string shape_string(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

int64_t count(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape sizes(const TensorType& t) {
  Shape s;
  for (const Dim& d : t.dims) s.push_back(d.size);
  return s;
}

Shape strides_of(const Shape& s) {
  Shape st(s.size(), 1);
  for (size_t k = s.size(); k-- > 1;) st[k - 1] = st[k] * s[k];
  return st;
}

HostTensor make(const Shape& shape) { return {shape, std::vector<float>(count(shape))}; }

// out[i] = src[base + sum_k index_k * stride_k] over the multi-index of `shape`.
HostTensor gather(const float* src, const Shape& shape, const Shape& stride, int64_t base) {
  HostTensor out = make(shape);
  const size_t r = shape.size();
  Shape index(r, 0);
  int64_t off = base;
  for (float& v : out.data) {
    v = src[off];
    for (size_t k = r; k-- > 0;) {
      off += stride[k];
      if (++index[k] < shape[k]) break;
      off -= stride[k] * shape[k];
      index[k] = 0;
    }
  }
  return out;
}

// `x` broadcast (numpy rules) to `shape`.
HostTensor expand(const HostTensor& x, const Shape& shape) {
  if (x.shape == shape) return x;
  const Shape st = strides_of(x.shape);
  const size_t lead = shape.size() - x.shape.size();
  Shape stride(shape.size(), 0);
  for (size_t k = 0; k < x.shape.size(); ++k) {
    if (x.shape[k] != 1 || shape[lead + k] == 1) stride[lead + k] = st[k];
  }
  return gather(x.data.data(), shape, stride, 0);
}

template <class F>
HostTensor map_unary(const HostTensor& x, F f) {
  HostTensor out = x;
  for (float& v : out.data) v = f(v);
  return out;
}

template <class F>
HostTensor map_binary(const HostTensor& a, const HostTensor& b, const Shape& shape, F f) {
  HostTensor xa = expand(a, shape);
  HostTensor xb = expand(b, shape);
  for (size_t i = 0; i < xa.data.size(); ++i) xa.data[i] = f(xa.data[i], xb.data[i]);
  return xa;
}

// Calls f(row pointer in, row pointer out, n) for each row of the last axis.
template <class F>
HostTensor map_rows(const HostTensor& x, Shape out_shape, F f) {
  const int64_t n = x.shape.back();
  const int64_t rows = n ? count(x.shape) / n : 0;
  HostTensor out = make(out_shape);
  const int64_t m = out_shape.back();
  for (int64_t r = 0; r < rows; ++r) f(x.data.data() + r * n, out.data.data() + r * m, n);
  return out;
}

float compare(const std::string& cmp, float a, float b) {
  bool r = cmp == "eq"   ? a == b
           : cmp == "ne" ? a != b
           : cmp == "lt" ? a < b
           : cmp == "le" ? a <= b
           : cmp == "gt" ? a > b
                         : a >= b;
  return r ? 1.0f : 0.0f;
}

class Evaluator {
 public:
  Evaluator(const Graph& g, const std::map<std::string, int64_t>& scalars)
      : m_g(g), m_scalars(scalars) {}

  HostTensor node(size_t i, const std::vector<const HostTensor*>& in,
                  const std::map<std::string, HostTensor>& inputs_by_name) {
    const Node& n = m_g.nodes[i];
    m_path = node_path(m_g, i);
    const Shape shape = sizes(n.type);
    switch (n.op) {
      case OpKind::input:
        return input(n, shape, inputs_by_name);
      case OpKind::matmul:
        return matmul(*in[0], *in[1], shape);
      case OpKind::batch_matmul:
        return batch_matmul(n, *in[0], *in[1], shape);
      case OpKind::add:
        return map_binary(*in[0], *in[1], shape, [](float a, float b) { return a + b; });
      case OpKind::sub:
        return map_binary(*in[0], *in[1], shape, [](float a, float b) { return a - b; });
      case OpKind::mul:
        return map_binary(*in[0], *in[1], shape, [](float a, float b) { return a * b; });
      case OpKind::div:
        return map_binary(*in[0], *in[1], shape, [](float a, float b) { return a / b; });
      case OpKind::maximum:
        return map_binary(*in[0], *in[1], shape, [](float a, float b) { return std::fmax(a, b); });
      case OpKind::bias_add:
        return map_binary(*in[0], *in[1], shape, [](float a, float b) { return a + b; });
      case OpKind::scale: {
        const float s = static_cast<float>(*n.real_attr("value"));
        return map_unary(*in[0], [s](float x) { return x * s; });
      }
      case OpKind::relu:
        return map_unary(*in[0], [](float x) { return x > 0.0f ? x : 0.0f; });
      case OpKind::gelu:
        return map_unary(
            *in[0], [](float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); });
      case OpKind::silu:
        return map_unary(*in[0], [](float x) { return x / (1.0f + std::exp(-x)); });
      case OpKind::exp:
        return map_unary(*in[0], [](float x) { return std::exp(x); });
      case OpKind::tanh:
        return map_unary(*in[0], [](float x) { return std::tanh(x); });
      case OpKind::sigmoid:
        return map_unary(*in[0], [](float x) { return 1.0f / (1.0f + std::exp(-x)); });
      case OpKind::rsqrt:
        return map_unary(*in[0], [](float x) { return 1.0f / std::sqrt(x); });
      case OpKind::softmax:
      case OpKind::log_softmax:
        return softmax(*in[0], n.op == OpKind::log_softmax);
      case OpKind::layernorm:
        return layernorm(*in[0], *in[1], *in[2], static_cast<float>(norm_eps(n)));
      case OpKind::rmsnorm:
        return rmsnorm(*in[0], *in[1], static_cast<float>(norm_eps(n)));
      case OpKind::reduce_sum:
      case OpKind::reduce_max:
      case OpKind::reduce_mean:
        return reduce(n.op, *in[0], shape);
      case OpKind::transpose:
        return transpose(*in[0], *n.ints_attr("perm"));
      case OpKind::reshape:
        return {shape, in[0]->data};
      case OpKind::slice:
        return slice(*in[0], *n.int_attr("axis"), *n.int_attr("start"), shape);
      case OpKind::concat:
        return concat(in, *n.int_attr("axis"), shape);
      case OpKind::iota:
        return iota(shape, *n.int_attr("axis"));
      case OpKind::compare: {
        const std::string cmp = *n.text_attr("cmp");
        if (const std::string* s = n.text_attr("scalar")) {
          const float rhs = static_cast<float>(m_scalars.at(*s));
          return map_unary(*in[0], [&](float x) { return compare(cmp, x, rhs); });
        }
        return map_binary(*in[0], *in[1], shape,
                          [&](float a, float b) { return compare(cmp, a, b); });
      }
      case OpKind::select: {
        HostTensor p = expand(*in[0], shape);
        HostTensor t = expand(*in[1], shape);
        HostTensor f = expand(*in[2], shape);
        for (size_t k = 0; k < p.data.size(); ++k)
          p.data[k] = p.data[k] != 0.0f ? t.data[k] : f.data[k];
        return p;
      }
      case OpKind::embedding:
        return embedding(*in[0], *in[1], shape);
      case OpKind::dynamic_update_slice:
        return dynamic_update_slice(n, *in[0], *in[1]);
      case OpKind::index_copy:
        return index_copy(*in[0], *in[1], *in[2]);
      case OpKind::decode_attention:
        return decode_attention(n, in);
      case OpKind::im2col:
        return im2col(n, *in[0], shape);
      case OpKind::broadcast:
        return expand(*in[0], shape);
      case OpKind::minimum:
        return map_binary(*in[0], *in[1], shape, [](float a, float b) { return std::fmin(a, b); });
      case OpKind::clip: {
        const double* lo = n.real_attr("lo");
        const double* hi = n.real_attr("hi");
        const float l = lo ? static_cast<float>(*lo) : -INFINITY;
        const float h = hi ? static_cast<float>(*hi) : INFINITY;
        return map_unary(*in[0], [=](float x) { return std::fmin(std::fmax(x, l), h); });
      }
      case OpKind::affine: {
        const float a = n.real_attr("value") ? static_cast<float>(*n.real_attr("value")) : 1.0f;
        const float b = n.real_attr("offset") ? static_cast<float>(*n.real_attr("offset")) : 0.0f;
        return map_unary(*in[0], [=](float x) { return x * a + b; });
      }
      case OpKind::sqrt:
        return map_unary(*in[0], [](float x) { return std::sqrt(x); });
      case OpKind::log:
        return map_unary(*in[0], [](float x) { return std::log(x); });
      case OpKind::abs:
        return map_unary(*in[0], [](float x) { return std::fabs(x); });
      case OpKind::reciprocal:
        return map_unary(*in[0], [](float x) { return 1.0f / x; });
      case OpKind::attention:
        return attention(n, in);
      case OpKind::all_reduce:
      case OpKind::all_gather:
      case OpKind::reduce_scatter:
      case OpKind::send:
      case OpKind::recv:
        // The value depends on the other ranks' inputs, which one graph does not hold.
        throw InputError(m_path, std::string(name_of(n.op)) +
                                     " has no single-rank reference (it needs every rank's input)");
      case OpKind::pad:
      case OpKind::reduce:
        break;  // evaluated as their expansion (evaluate() expands them first)
    }
    throw InputError(m_path, "unhandled op");
  }

 private:
  HostTensor input(const Node& n, const Shape& shape,
                   const std::map<std::string, HostTensor>& inputs_by_name) const {
    auto it = inputs_by_name.find(n.name);
    if (it == inputs_by_name.end()) throw InputError("inputs", "'" + n.name + "' not given");
    const HostTensor& t = it->second;
    if (t.shape != shape) {
      throw InputError("inputs", "'" + n.name + "' has shape " + shape_string(t.shape) +
                                     ", expected " + shape_string(shape));
    }
    if (static_cast<int64_t>(t.data.size()) != count(shape)) {
      throw InputError("inputs", "'" + n.name + "' has " + std::to_string(t.data.size()) +
                                     " values for shape " + shape_string(shape));
    }
    return t;
  }

  static HostTensor matmul(const HostTensor& a, const HostTensor& b, const Shape& shape) {
    const int64_t k = b.shape[0], n = b.shape[1];
    const int64_t m = count(a.shape) / k;
    HostTensor out = make(shape);
    Eigen::Map<const RowMat> ma(a.data.data(), m, k);
    Eigen::Map<const RowMat> mb(b.data.data(), k, n);
    Eigen::Map<RowMat> mo(out.data.data(), m, n);
    mo.noalias() = ma * mb;
    return out;
  }

  static HostTensor batch_matmul(const Node& node, const HostTensor& a, const HostTensor& b,
                                 const Shape& shape) {
    const int64_t* tb = node.int_attr("transpose_b");
    const bool transposed = tb && *tb;
    const int64_t batch = a.shape[0], m = a.shape[1], k = a.shape[2], n = shape[2];
    HostTensor out = make(shape);
    for (int64_t i = 0; i < batch; ++i) {
      Eigen::Map<const RowMat> ma(a.data.data() + i * m * k, m, k);
      Eigen::Map<RowMat> mo(out.data.data() + i * m * n, m, n);
      if (transposed) {
        Eigen::Map<const RowMat> mb(b.data.data() + i * n * k, n, k);
        mo.noalias() = ma * mb.transpose();
      } else {
        Eigen::Map<const RowMat> mb(b.data.data() + i * k * n, k, n);
        mo.noalias() = ma * mb;
      }
    }
    return out;
  }

  static HostTensor softmax(const HostTensor& x, bool log) {
    return map_rows(x, x.shape, [log](const float* in, float* out, int64_t n) {
      float mx = -INFINITY;
      for (int64_t j = 0; j < n; ++j) mx = std::max(mx, in[j]);
      float sum = 0.0f;
      for (int64_t j = 0; j < n; ++j) {
        out[j] = std::exp(in[j] - mx);
        sum += out[j];
      }
      if (log) {
        const float lse = std::log(sum);
        for (int64_t j = 0; j < n; ++j) out[j] = in[j] - mx - lse;
      } else {
        for (int64_t j = 0; j < n; ++j) out[j] /= sum;
      }
    });
  }

  static HostTensor layernorm(const HostTensor& x, const HostTensor& gamma, const HostTensor& beta,
                              float eps) {
    const float* g = gamma.data.data();
    const float* b = beta.data.data();
    return map_rows(x, x.shape, [=](const float* in, float* out, int64_t n) {
      // Sums in double: a float sum of rows whose mean dwarfs their spread (1000 + noise) is off
      // by more than the chip's shifted statistics.
      double sum = 0.0;
      for (int64_t j = 0; j < n; ++j) sum += in[j];
      const double mean = sum / static_cast<double>(n);
      double sq = 0.0;
      for (int64_t j = 0; j < n; ++j) sq += (in[j] - mean) * (in[j] - mean);
      const double rstd = 1.0 / std::sqrt(sq / static_cast<double>(n) + eps);
      for (int64_t j = 0; j < n; ++j)
        out[j] = static_cast<float>((in[j] - mean) * rstd) * g[j] + b[j];
    });
  }

  static HostTensor rmsnorm(const HostTensor& x, const HostTensor& gamma, float eps) {
    const float* g = gamma.data.data();
    return map_rows(x, x.shape, [=](const float* in, float* out, int64_t n) {
      float sq = 0.0f;
      for (int64_t j = 0; j < n; ++j) sq += in[j] * in[j];
      const float rstd = 1.0f / std::sqrt(sq / static_cast<float>(n) + eps);
      for (int64_t j = 0; j < n; ++j) out[j] = in[j] * rstd * g[j];
    });
  }

  static HostTensor reduce(OpKind op, const HostTensor& x, const Shape& shape) {
    return map_rows(x, shape, [op](const float* in, float* out, int64_t n) {
      if (op == OpKind::reduce_max) {
        float mx = -INFINITY;
        for (int64_t j = 0; j < n; ++j) mx = std::fmax(mx, in[j]);
        *out = mx;
        return;
      }
      float sum = 0.0f;
      for (int64_t j = 0; j < n; ++j) sum += in[j];
      *out = op == OpKind::reduce_mean ? sum / static_cast<float>(n) : sum;
    });
  }

  static HostTensor transpose(const HostTensor& x, const std::vector<int64_t>& perm) {
    const Shape st = strides_of(x.shape);
    Shape shape, stride;
    for (int64_t p : perm) {
      shape.push_back(x.shape[p]);
      stride.push_back(st[p]);
    }
    return gather(x.data.data(), shape, stride, 0);
  }

  static HostTensor slice(const HostTensor& x, int64_t axis, int64_t start, const Shape& shape) {
    const Shape st = strides_of(x.shape);
    return gather(x.data.data(), shape, st, start * st[axis]);
  }

  static HostTensor concat(const std::vector<const HostTensor*>& in, int64_t axis,
                           const Shape& shape) {
    HostTensor out = make(shape);
    int64_t outer = 1;
    for (int64_t k = 0; k < axis; ++k) outer *= shape[k];
    const int64_t row = count(shape) / std::max<int64_t>(outer, 1);
    int64_t at = 0;  // offset of the current input's block within an output row
    for (const HostTensor* t : in) {
      const int64_t block = count(t->shape) / std::max<int64_t>(outer, 1);
      for (int64_t o = 0; o < outer; ++o) {
        std::copy_n(t->data.data() + o * block, block, out.data.data() + o * row + at);
      }
      at += block;
    }
    return out;
  }

  static HostTensor iota(const Shape& shape, int64_t axis) {
    HostTensor out = make(shape);
    const int64_t inner = strides_of(shape)[axis];
    for (size_t i = 0; i < out.data.size(); ++i) {
      out.data[i] = static_cast<float>((static_cast<int64_t>(i) / inner) % shape[axis]);
    }
    return out;
  }

  HostTensor embedding(const HostTensor& table, const HostTensor& ids, const Shape& shape) const {
    const int64_t vocab = table.shape[0], width = table.shape[1];
    HostTensor out = make(shape);
    for (size_t i = 0; i < ids.data.size(); ++i) {
      const float id = ids.data[i];
      if (!(id >= 0.0f && id < static_cast<float>(vocab))) {
        throw InputError(m_path, "id " + std::to_string(static_cast<int64_t>(id)) + " at element " +
                                     std::to_string(i) + " is out of range [0, " +
                                     std::to_string(vocab) + ")");
      }
      const int64_t row = static_cast<int64_t>(id);
      std::copy_n(table.data.data() + row * width, width, out.data.data() + i * width);
    }
    return out;
  }

  HostTensor index_copy(const HostTensor& dst, const HostTensor& ids, const HostTensor& src) const {
    const int64_t rows = dst.shape[0], width = dst.shape[1];
    HostTensor out = dst;
    for (size_t i = 0; i < ids.data.size(); ++i) {
      const float id = ids.data[i];
      if (!(id >= 0.0f && id < static_cast<float>(rows))) {
        throw InputError(m_path, "index_copy id " + std::to_string(static_cast<int64_t>(id)) +
                                     " at element " + std::to_string(i) + " is out of range [0, " +
                                     std::to_string(rows) + ")");
      }
      std::copy_n(src.data.data() + static_cast<int64_t>(i) * width, width,
                  out.data.data() + static_cast<int64_t>(id) * width);
    }
    return out;
  }

  // Per sequence b and head h: softmax(scale * q_h . k_h[ids[b, l]] + bias[b, h, l]) over l,
  // then those weights times v_h's rows.
  HostTensor decode_attention(const Node& n, const std::vector<const HostTensor*>& in) const {
    const HostTensor &q = *in[0], &k = *in[1], &v = *in[2], &ids = *in[3];
    const HostTensor* bias = in.size() > 4 ? in[4] : nullptr;
    const int64_t B = q.shape[0], D = q.shape[1], N = k.shape[0], L = ids.shape[1];
    const int64_t H = *n.int_attr("heads"), hd = D / H;
    const double scale = attention_scale(n);
    HostTensor out = make(q.shape);
    std::vector<double> s(static_cast<size_t>(L));
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t l = 0; l < L; ++l) {
        const float id = ids.data[static_cast<size_t>(b * L + l)];
        if (!(id >= 0.0f && id < static_cast<float>(N))) {
          throw InputError(m_path, "id " + std::to_string(static_cast<int64_t>(id)) +
                                       " of sequence " + std::to_string(b) +
                                       " is out of range [0, " + std::to_string(N) + ")");
        }
      }
      for (int64_t h = 0; h < H; ++h) {
        const float* qh = q.data.data() + b * D + h * hd;
        double top = -INFINITY;
        for (int64_t l = 0; l < L; ++l) {
          const int64_t row = static_cast<int64_t>(ids.data[static_cast<size_t>(b * L + l)]);
          const float* kh = k.data.data() + row * D + h * hd;
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d) dot += double(qh[d]) * double(kh[d]);
          s[l] = scale * dot + (bias ? bias->data[static_cast<size_t>((b * H + h) * L + l)] : 0.0);
          top = std::max(top, s[l]);
        }
        double sum = 0;
        for (double& x : s) sum += (x = std::exp(x - top));
        float* o = out.data.data() + b * D + h * hd;
        for (int64_t l = 0; l < L; ++l) {
          const int64_t row = static_cast<int64_t>(ids.data[static_cast<size_t>(b * L + l)]);
          const float* vh = v.data.data() + row * D + h * hd;
          const double p = s[l] / sum;
          for (int64_t d = 0; d < hd; ++d) o[d] += static_cast<float>(p * vh[d]);
        }
      }
    }
    return out;
  }

  // Per head h and query i: softmax over the keys j that i may see (same sequence of `seq`
  // rows, j <= i when causal, the same segment id) of scale * q_h[i] . k_h[j] (+ bias[i, j]),
  // then those weights times v_h's rows.
  HostTensor attention(const Node& n, const std::vector<const HostTensor*>& in) const {
    const HostTensor &q = *in[0], &k = *in[1], &v = *in[2];
    const HostTensor* mask = in.size() > 3 ? in[3] : nullptr;
    const bool segments = mask && m_g.find(n.inputs[3])->type.dtype == isa::DType::int32;
    // [B, L, D] operands: B sequences of L rows (queries and keys alike).
    const bool batched = q.shape.size() == 3;
    const int64_t D = q.shape.back();
    const int64_t Lq = count(q.shape) / D, Lk = count(k.shape) / D;
    const int64_t H = *n.int_attr("heads"), hd = D / H;
    const int64_t* c = n.int_attr("causal");
    const int64_t* sq = n.int_attr("seq");
    const bool causal = c && *c != 0;
    const int64_t seq_q = batched ? q.shape[1] : sq ? *sq : Lq;
    const int64_t seq_k = batched ? k.shape[1] : sq ? *sq : Lk;
    const double scale = attention_scale(n);
    HostTensor out = make(q.shape);
    std::vector<double> s(static_cast<size_t>(Lk));
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < Lq; ++i) {
        const float* qh = q.data.data() + i * D + h * hd;
        double top = -INFINITY;
        for (int64_t j = 0; j < Lk; ++j) {
          bool sees = i / seq_q == j / seq_k && (!causal || j % seq_k <= i % seq_q);
          if (segments) sees = sees && mask->data[static_cast<size_t>(i)] == mask->data[j];
          if (!sees) {
            s[j] = -INFINITY;
            continue;
          }
          const float* kh = k.data.data() + j * D + h * hd;
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d) dot += double(qh[d]) * double(kh[d]);
          s[j] = scale * dot + (mask && !segments
                                    ? mask->data[static_cast<size_t>(
                                          batched ? i % seq_q * seq_k + j % seq_k : i * Lk + j)]
                                    : 0.0);
          top = std::max(top, s[j]);
        }
        double sum = 0;
        for (double& x : s) sum += (x = std::isinf(x) ? 0.0 : std::exp(x - top));
        float* o = out.data.data() + i * D + h * hd;
        for (int64_t j = 0; j < Lk; ++j) {
          if (s[j] == 0.0) continue;
          const float* vh = v.data.data() + j * D + h * hd;
          const double p = s[j] / sum;
          for (int64_t d = 0; d < hd; ++d) o[d] += static_cast<float>(p * vh[d]);
        }
      }
    }
    return out;
  }

  HostTensor dynamic_update_slice(const Node& n, const HostTensor& dst,
                                  const HostTensor& update) const {
    const int64_t* a = n.int_attr("axis");
    const int64_t axis = a ? *a : 0;
    const std::string& scalar = *n.text_attr("scalar");
    const int64_t pos = m_scalars.at(scalar);
    const int64_t rows = update.shape[axis], room = dst.shape[axis];
    if (pos < 0 || pos + rows > room) {
      throw InputError(m_path, "position '" + scalar + "' = " + std::to_string(pos) + " with " +
                                   std::to_string(rows) + " update rows overruns dst's " +
                                   std::to_string(room) + " rows along axis " +
                                   std::to_string(axis));
    }
    HostTensor out = dst;
    int64_t outer = 1;
    for (int64_t k = 0; k < axis; ++k) outer *= dst.shape[k];
    const int64_t inner = strides_of(dst.shape)[axis];
    for (int64_t o = 0; o < outer; ++o) {
      std::copy_n(update.data.data() + o * rows * inner, rows * inner,
                  out.data.data() + (o * room + pos) * inner);
    }
    return out;
  }

  // out[n, c, oh, ow, kh, kw] = x[n, c, oh * sh + kh * dh, ow * sw + kw * dw].
  static HostTensor im2col(const Node& n, const HostTensor& x, const Shape& shape) {
    const std::vector<int64_t> one = {1, 1};
    const auto& s = n.ints_attr("strides") ? *n.ints_attr("strides") : one;
    const auto& d = n.ints_attr("dilations") ? *n.ints_attr("dilations") : one;
    const Shape st = strides_of(x.shape);
    return gather(x.data.data(), shape,
                  {st[0], st[1], s[0] * st[2], s[1] * st[3], d[0] * st[2], d[1] * st[3]}, 0);
  }

  const Graph& m_g;
  const std::map<std::string, int64_t>& m_scalars;
  std::string m_path;
};

void check_scalars(const Graph& g, const std::map<std::string, int64_t>& scalars) {
  for (const ScalarParam& s : g.scalars) {
    auto it = scalars.find(s.name);
    if (it == scalars.end()) throw InputError("scalars", "'" + s.name + "' not given");
    if (it->second < s.min || it->second > s.max) {
      throw InputError("scalars", "'" + s.name + "' = " + std::to_string(it->second) +
                                      " is outside [" + std::to_string(s.min) + ", " +
                                      std::to_string(s.max) + "]");
    }
  }
  for (const auto& [name, value] : scalars) {
    if (!g.find_scalar(name)) {
      throw InputError("scalars", "'" + name + "' is not a scalar of the graph");
    }
  }
}

}  // namespace

float round_to_dtype(isa::DType dtype, float v) {
  switch (dtype) {
    case isa::DType::fp32:
      return v;
    case isa::DType::bf16:
      return isa::bf16_to_float(isa::float_to_bf16(v));
    case isa::DType::fp16:
      return isa::fp16_to_float(isa::float_to_fp16(v));
    case isa::DType::int32:
      return static_cast<float>(isa::float_to_int32(v));
  }
  return v;
}

std::map<int32_t, HostTensor> evaluate(const Graph& g,
                                       const std::map<std::string, HostTensor>& inputs_by_name,
                                       const std::map<std::string, int64_t>& scalars) {
  Graph t = g;
  // Unknown dims of inputs take the extents given for them.
  for (Node& n : t.nodes) {
    if (n.op != OpKind::input) continue;
    auto it = inputs_by_name.find(n.name);
    if (it == inputs_by_name.end() || it->second.shape.size() != n.type.dims.size()) continue;
    for (size_t k = 0; k < n.type.dims.size(); ++k) {
      if (n.type.dims[k].kind == Dim::Kind::unknown && it->second.shape[k] >= 1) {
        n.type.dims[k] = Dim::of(it->second.shape[k]);
      }
    }
  }
  infer_types(t);
  // Composites are evaluated as the ops the compiler expands them into (composites.h).
  const bool composite = has_composites(t);
  if (composite) t = expand_composites(t);
  check_scalars(t, scalars);
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    for (const Dim& d : t.nodes[i].type.dims) {
      if (d.kind == Dim::Kind::unknown) {
        throw InputError(node_path(t, i),
                         "cannot evaluate the unknown dim of " + to_string(t.nodes[i].type));
      }
    }
  }
  for (const auto& entry : inputs_by_name) {
    const std::string& name =
        entry.first;  // not a structured binding: clang's C++17 cannot capture one
    auto is_it = [&](const Node& n) { return n.op == OpKind::input && n.name == name; };
    if (std::none_of(t.nodes.begin(), t.nodes.end(), is_it)) {
      throw InputError("inputs", "'" + name + "' is not an input of the graph");
    }
  }

  std::map<int32_t, HostTensor> values;
  Evaluator ev(t, scalars);
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    std::vector<const HostTensor*> in;
    for (int32_t id : n.inputs) in.push_back(&values.at(id));
    HostTensor out = ev.node(i, in, inputs_by_name);
    for (float& v : out.data) v = round_to_dtype(n.type.dtype, v);
    values[n.id] = std::move(out);
  }
  if (composite) {
    for (auto it = values.begin(); it != values.end();) {
      it = g.find(it->first) ? std::next(it) : values.erase(it);
    }
  }
  return values;
}

}  // namespace wallsim::compiler_stub
