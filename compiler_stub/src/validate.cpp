// Graph validation and shape inference for every op of ops.def.
#include "wallsim/compiler_stub/validate.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "wallsim/base/params.h"

namespace wallsim::compiler_stub {
namespace {

using base::InputError;
using Dims = std::vector<Dim>;

constexpr int64_t kMaxElements = int64_t{1} << 40;

bool is_one(const Dim& d) { return d.kind == Dim::Kind::fixed && d.size == 1; }

// Two dims that must describe the same extent, merged (a bounded dim wins over a static one at
// its max, any dim over an unknown one); nullopt when they cannot.
std::optional<Dim> merge(const Dim& a, const Dim& b) {
  if (a.kind == Dim::Kind::unknown) return b;
  if (b.kind == Dim::Kind::unknown) return a;
  if (a.size != b.size) return std::nullopt;
  if (a.kind == Dim::Kind::bounded && b.kind == Dim::Kind::bounded) {
    return a.scalar == b.scalar ? std::optional<Dim>(a) : std::nullopt;
  }
  return a.kind == Dim::Kind::bounded ? a : b;
}

std::optional<Dim> broadcast(const Dim& a, const Dim& b) {
  if (is_one(a)) return b;
  if (is_one(b)) return a;
  return merge(a, b);
}

std::string ints_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

const char* const kInputNames[] = {"first", "second", "third"};

// Checks and infers one node; `fail` throws with the node's path.
class NodeChecker {
 public:
  NodeChecker(const Graph& g, const Node& n, std::vector<const TensorType*> in, std::string path)
      : m_g(g), m_n(n), m_in(std::move(in)), m_path(std::move(path)) {}

  [[noreturn]] void fail(const std::string& problem) const { throw InputError(m_path, problem); }

  TensorType infer() {
    check_attrs();
    switch (m_n.op) {
      case OpKind::input:
      case OpKind::iota:
        return declared();
      case OpKind::matmul:
        return matmul();
      case OpKind::batch_matmul:
        return batch_matmul();
      case OpKind::add:
      case OpKind::sub:
      case OpKind::mul:
      case OpKind::div:
      case OpKind::maximum:
      case OpKind::minimum:
        return like(0, broadcast_all({0, 1}));
      case OpKind::bias_add:
        return bias_add();
      case OpKind::scale:
        required_real("value");
        return *m_in[0];
      case OpKind::relu:
      case OpKind::gelu:
      case OpKind::silu:
      case OpKind::exp:
      case OpKind::tanh:
      case OpKind::sigmoid:
      case OpKind::rsqrt:
      case OpKind::sqrt:
      case OpKind::log:
      case OpKind::abs:
      case OpKind::reciprocal:
      case OpKind::clip:
      case OpKind::affine:
        return *m_in[0];
      case OpKind::im2col:
        return im2col();
      case OpKind::broadcast:
        return broadcast_to();
      case OpKind::softmax:
      case OpKind::log_softmax:
        need_rank_at_least(0, 1);
        return *m_in[0];
      case OpKind::layernorm:
      case OpKind::rmsnorm:
        return norm();
      case OpKind::reduce_sum:
      case OpKind::reduce_max:
      case OpKind::reduce_mean: {
        need_rank_at_least(0, 1);
        TensorType t = *m_in[0];
        t.dims.back() = Dim::of(1);
        return t;
      }
      case OpKind::transpose:
        return transpose();
      case OpKind::reshape:
        return reshape();
      case OpKind::slice:
        return slice();
      case OpKind::concat:
        return concat();
      case OpKind::compare:
        return compare();
      case OpKind::select:
        return like(1, broadcast_all({0, 1, 2}));
      case OpKind::embedding:
        return embedding();
      case OpKind::dynamic_update_slice:
        return dynamic_update_slice();
      case OpKind::index_copy:
        return index_copy();
      case OpKind::decode_attention:
        return decode_attention();
      case OpKind::attention:
        return attention();
    }
    fail("unhandled op");
  }

 private:
  const Dims& dims(size_t i) const { return m_in[i]->dims; }
  int64_t rank(size_t i) const { return static_cast<int64_t>(m_in[i]->dims.size()); }
  TensorType like(size_t i, Dims d) const { return {m_in[i]->dtype, std::move(d)}; }

  void check_attrs() const {
    const bool declares = m_n.op == OpKind::input || m_n.op == OpKind::iota;
    for (const auto& [key, value] : m_n.attrs) {
      if (declares && (key == "shape" || key == "dtype" || key == "role")) {
        fail("'" + key + "' is held by Node::" + (key == "role" ? "role" : "type") +
             ", not by an attribute");
      }
      auto kind = attr_kind(key);
      if (!accepts_attr(m_n.op, key) || !kind) {
        std::string list(info(m_n.op).attrs);
        fail("unknown attribute '" + key + "' (this op takes: " + (list.empty() ? "none" : list) +
             ")");
      }
      bool ok = false;
      switch (*kind) {
        case AttrKind::integer:
          ok = std::holds_alternative<int64_t>(value);
          break;
        case AttrKind::real:
          ok = std::holds_alternative<double>(value) && std::isfinite(std::get<double>(value));
          break;
        case AttrKind::text:
          ok = std::holds_alternative<std::string>(value);
          break;
        case AttrKind::ints:
          ok = std::holds_alternative<std::vector<int64_t>>(value);
          break;
      }
      if (!ok) fail("attribute '" + key + "' must be " + std::string(name_of(*kind)));
    }
    if (declares && m_n.dtype && *m_n.dtype != m_n.type.dtype) {
      fail("explicit dtype " + std::string(isa::name_of(*m_n.dtype)) +
           " differs from the declared " + std::string(isa::name_of(m_n.type.dtype)) +
           " (input and iota declare their type)");
    }
  }

  int64_t required_int(const std::string& key) const {
    const int64_t* v = m_n.int_attr(key);
    if (!v) fail("missing attribute '" + key + "'");
    return *v;
  }
  double required_real(const std::string& key) const {
    const double* v = m_n.real_attr(key);
    if (!v) fail("missing attribute '" + key + "'");
    return *v;
  }
  const std::string& required_text(const std::string& key) const {
    const std::string* v = m_n.text_attr(key);
    if (!v) fail("missing attribute '" + key + "'");
    return *v;
  }
  const std::vector<int64_t>& required_ints(const std::string& key) const {
    const std::vector<int64_t>* v = m_n.ints_attr(key);
    if (!v) fail("missing attribute '" + key + "'");
    return *v;
  }
  const ScalarParam& declared_scalar(const std::string& name) const {
    const ScalarParam* s = m_g.find_scalar(name);
    if (!s) fail("scalar '" + name + "' is not declared in the graph's scalars");
    return *s;
  }
  int64_t axis_in(const std::string& key, int64_t r) const {
    int64_t a = required_int(key);
    if (a < 0 || a >= r) {
      fail(key + " " + std::to_string(a) + " is out of range for rank " + std::to_string(r));
    }
    return a;
  }

  void need_rank_at_least(size_t i, int64_t r) const {
    if (rank(i) < r) {
      fail(std::string(kInputNames[i]) + " input must have rank >= " + std::to_string(r) +
           ", got " + to_string(dims(i)));
    }
  }
  void need_rank(size_t i, int64_t r, const char* what) const {
    if (rank(i) != r) {
      fail(std::string(what) + " must have rank " + std::to_string(r) + ", got " +
           to_string(dims(i)));
    }
  }
  Dim same(const Dim& a, const Dim& b, const std::string& what) const {
    auto d = merge(a, b);
    if (!d) fail(what + ": " + to_string(a) + " vs " + to_string(b));
    return *d;
  }

  TensorType declared() const {
    const Dims& d = m_n.type.dims;
    if (d.empty()) fail("shape must have at least one dim");
    for (size_t k = 0; k < d.size(); ++k) {
      std::string at = "shape[" + std::to_string(k) + "]";
      if (d[k].kind == Dim::Kind::unknown) continue;
      if (d[k].size < 1) fail(at + " must be at least 1, got " + std::to_string(d[k].size));
      if (d[k].kind == Dim::Kind::bounded) {
        const ScalarParam* s = m_g.find_scalar(d[k].scalar);
        if (!s) fail(at + " is bounded by undeclared scalar '" + d[k].scalar + "'");
        if (s->max > d[k].size) {
          fail(at + " is bounded by " + std::to_string(d[k].size) + " but scalar '" + s->name +
               "' can reach " + std::to_string(s->max));
        }
      }
    }
    if (m_n.op == OpKind::iota) axis_in("axis", static_cast<int64_t>(d.size()));
    return m_n.type;
  }

  Dims broadcast_all(std::initializer_list<size_t> which) const {
    Dims out;
    for (size_t i : which) {
      const Dims& d = dims(i);
      Dims next(std::max(out.size(), d.size()));
      for (size_t k = 0; k < next.size(); ++k) {
        // Right-aligned: position k from the end.
        size_t from_end = next.size() - 1 - k;
        const Dim* a = from_end < out.size() ? &out[out.size() - 1 - from_end] : nullptr;
        const Dim* b = from_end < d.size() ? &d[d.size() - 1 - from_end] : nullptr;
        if (!a || !b) {
          next[k] = a ? *a : *b;
          continue;
        }
        auto m = broadcast(*a, *b);
        if (!m) {
          fail("cannot broadcast " + to_string(out) + " with the " + kInputNames[i] + " input " +
               to_string(d) + ": " + to_string(*a) + " vs " + to_string(*b));
        }
        next[k] = *m;
      }
      out = std::move(next);
    }
    return out;
  }

  TensorType matmul() const {
    need_rank_at_least(0, 2);
    need_rank(1, 2, "second input (weights [K, N])");
    const Dims& a = dims(0);
    const Dims& b = dims(1);
    if (!merge(a.back(), b[0])) {
      fail("K mismatch: " + to_string(a) + " x " + to_string(b) + " (" + to_string(a.back()) +
           " vs " + to_string(b[0]) + ")");
    }
    Dims out(a.begin(), a.end() - 1);
    out.push_back(b[1]);
    return like(0, out);
  }

  TensorType batch_matmul() const {
    need_rank(0, 3, "first input [B, M, K]");
    need_rank(1, 3, "second input");
    int64_t tb = 0;
    if (const int64_t* v = m_n.int_attr("transpose_b")) tb = *v;
    if (tb != 0 && tb != 1) fail("transpose_b must be 0 or 1, got " + std::to_string(tb));
    const Dims& a = dims(0);
    const Dims& b = dims(1);
    Dim batch = same(a[0], b[0], "batch mismatch " + to_string(a) + " x " + to_string(b));
    const Dim& k = tb ? b[2] : b[1];
    if (!merge(a[2], k)) {
      fail("K mismatch: " + to_string(a) + " x " + to_string(b) + (tb ? " (transpose_b)" : "") +
           " (" + to_string(a[2]) + " vs " + to_string(k) + ")");
    }
    return like(0, {batch, a[1], tb ? b[1] : b[2]});
  }

  TensorType bias_add() const {
    need_rank_at_least(0, 1);
    if (rank(1) != 1 || !merge(dims(0).back(), dims(1)[0])) {
      fail("bias must be [N] with N the last dim of " + to_string(dims(0)) + ", got " +
           to_string(dims(1)));
    }
    return *m_in[0];
  }

  TensorType norm() const {
    need_rank_at_least(0, 1);
    const double eps = norm_eps(m_n);
    if (eps < 0) fail("eps must be >= 0, got " + std::to_string(eps));
    static const char* const kParam[] = {"", "gamma", "beta"};
    for (size_t i = 1; i < m_in.size(); ++i) {
      if (rank(i) != 1 || !merge(dims(0).back(), dims(i)[0])) {
        fail(std::string(kParam[i]) + " must be [N] with N the last dim of " + to_string(dims(0)) +
             ", got " + to_string(dims(i)));
      }
    }
    return *m_in[0];
  }

  TensorType transpose() const {
    const std::vector<int64_t>& perm = required_ints("perm");
    const int64_t r = rank(0);
    std::vector<bool> seen(r, false);
    bool ok = static_cast<int64_t>(perm.size()) == r;
    for (size_t k = 0; ok && k < perm.size(); ++k) {
      ok = perm[k] >= 0 && perm[k] < r && !seen[perm[k]];
      if (ok) seen[perm[k]] = true;
    }
    if (!ok) {
      fail("perm " + ints_string(perm) + " is not a permutation of the " + std::to_string(r) +
           " axes of " + to_string(dims(0)));
    }
    Dims out;
    for (int64_t p : perm) out.push_back(dims(0)[p]);
    return like(0, out);
  }

  // Two ints per spatial axis (kernel), or 1s when absent (strides, dilations).
  std::vector<int64_t> pair_attr(const std::string& key, bool required) const {
    const std::vector<int64_t>* v = m_n.ints_attr(key);
    if (!v) {
      if (required) fail("missing attribute '" + key + "'");
      return {1, 1};
    }
    if (v->size() != 2 || (*v)[0] < 1 || (*v)[1] < 1) {
      fail(key + " must be two integers >= 1, got " + ints_string(*v));
    }
    return *v;
  }

  TensorType im2col() const {
    need_rank(0, 4, "input [N, C, H, W]");
    for (const Dim& d : dims(0)) {
      if (d.kind != Dim::Kind::fixed) fail("im2col needs static dims, got " + to_string(dims(0)));
    }
    const auto k = pair_attr("kernel", true), s = pair_attr("strides", false),
               d = pair_attr("dilations", false);
    Dims out = {dims(0)[0], dims(0)[1]};
    for (size_t a = 0; a < 2; ++a) {
      const int64_t span = d[a] * (k[a] - 1) + 1, extent = dims(0)[2 + a].size;
      if (span > extent) {
        fail("a window of " + std::to_string(span) + " exceeds the input's " +
             std::to_string(extent) + " along spatial axis " + std::to_string(a));
      }
      out.push_back(Dim::of((extent - span) / s[a] + 1));
    }
    out.push_back(Dim::of(k[0]));
    out.push_back(Dim::of(k[1]));
    return like(0, out);
  }

  TensorType broadcast_to() const {
    const std::vector<int64_t>& shape = required_ints("shape");
    const Dims& in = dims(0);
    bool ok = shape.size() >= in.size();
    for (size_t k = 0; ok && k < in.size(); ++k) {
      const Dim& d = in[in.size() - 1 - k];
      const int64_t to = shape[shape.size() - 1 - k];
      ok = d.kind == Dim::Kind::fixed && (d.size == to || d.size == 1);
    }
    for (int64_t v : shape) ok = ok && v >= 1;
    if (!ok) fail("cannot broadcast " + to_string(in) + " to " + ints_string(shape));
    Dims out;
    for (int64_t v : shape) out.push_back(Dim::of(v));
    return like(0, out);
  }

  TensorType reshape() const {
    const std::vector<int64_t>& shape = required_ints("shape");
    if (shape.empty()) fail("shape must have at least one dim");
    for (int64_t s : shape) {
      if (s < 1) fail("shape " + ints_string(shape) + " has a dim below 1");
    }
    const Dims& in = dims(0);
    // Bounded dims must lead and stay in place: the dims up to the last bounded one are kept.
    size_t keep = 0;
    bool unknown = false;
    for (size_t k = 0; k < in.size(); ++k) {
      if (in[k].kind == Dim::Kind::bounded) keep = k + 1;
      if (in[k].kind == Dim::Kind::unknown) unknown = true;
    }
    Dims out;
    for (size_t k = 0; k < shape.size(); ++k) {
      if (k < keep) {
        if (in[k].kind == Dim::Kind::unknown || shape[k] != in[k].size) {
          fail("reshape of " + to_string(in) + " to " + ints_string(shape) +
               " must keep the leading dims up to the last bounded one in place");
        }
        out.push_back(in[k]);
      } else {
        out.push_back(Dim::of(shape[k]));
      }
    }
    if (shape.size() < keep) {
      fail("reshape of " + to_string(in) + " to " + ints_string(shape) +
           " must keep the leading dims up to the last bounded one in place");
    }
    int64_t to = 1;
    for (int64_t s : shape) to = to > kMaxElements / s ? kMaxElements + 1 : to * s;
    if (!unknown && TensorType{m_in[0]->dtype, in}.elements() != to) {
      fail("reshape of " + to_string(in) + " (" +
           std::to_string(TensorType{m_in[0]->dtype, in}.elements()) + " elements) to " +
           ints_string(shape) + " (" + std::to_string(to) + " elements)");
    }
    return like(0, out);
  }

  TensorType slice() const {
    const int64_t axis = axis_in("axis", rank(0));
    const int64_t start = required_int("start");
    const int64_t limit = required_int("limit");
    const Dim& d = dims(0)[axis];
    if (d.kind == Dim::Kind::bounded) {
      fail("slice along bounded axis " + std::to_string(axis) + " (" + to_string(d) +
           ") is not supported");
    }
    const bool in_range =
        start >= 0 && start < limit && (d.kind == Dim::Kind::unknown || limit <= d.size);
    if (!in_range) {
      fail("slice [" + std::to_string(start) + ", " + std::to_string(limit) + ") of axis " +
           std::to_string(axis) + " (size " + to_string(d) + ") is out of range or empty");
    }
    Dims out = dims(0);
    out[axis] = Dim::of(limit - start);
    return like(0, out);
  }

  TensorType concat() const {
    const int64_t axis = axis_in("axis", rank(0));
    Dims out = dims(0);
    for (size_t i = 1; i < m_in.size(); ++i) {
      if (rank(i) != rank(0)) {
        fail("input " + std::to_string(i) + " " + to_string(dims(i)) +
             " has a different rank from " + to_string(dims(0)));
      }
      for (int64_t k = 0; k < rank(0); ++k) {
        const Dim& d = dims(i)[k];
        if (k == axis) continue;
        auto m = merge(out[k], d);
        if (!m) {
          fail("input " + std::to_string(i) + " " + to_string(dims(i)) + " does not match " +
               to_string(dims(0)) + " in dim " + std::to_string(k));
        }
        out[k] = *m;
      }
    }
    int64_t total = 0;
    for (size_t i = 0; i < m_in.size(); ++i) {
      const Dim& d = dims(i)[axis];
      if (d.kind == Dim::Kind::bounded) {
        fail("concat along bounded dim " + to_string(d) + " of input " + std::to_string(i) +
             " is not supported");
      }
      if (d.kind == Dim::Kind::unknown) total = -1;
      if (total >= 0) total += d.size;
    }
    out[axis] = total < 0 ? Dim::unknown() : Dim::of(total);
    return like(0, out);
  }

  TensorType compare() const {
    const std::string& cmp = required_text("cmp");
    static const char* const kCmps[] = {"eq", "ne", "lt", "le", "gt", "ge"};
    if (std::find(std::begin(kCmps), std::end(kCmps), cmp) == std::end(kCmps)) {
      fail("cmp \"" + cmp + "\" is not one of eq ne lt le gt ge");
    }
    const std::string* scalar = m_n.text_attr("scalar");
    if (m_in.size() == 2 && scalar) {
      fail("compares with a second input or with scalar '" + *scalar + "', not both");
    }
    if (m_in.size() == 1 && !scalar) fail("needs a second input or a 'scalar' attribute");
    if (scalar) {
      declared_scalar(*scalar);
      return *m_in[0];
    }
    return like(0, broadcast_all({0, 1}));
  }

  TensorType embedding() const {
    need_rank(0, 2, "table [V, D]");
    if (m_in[1]->dtype != isa::DType::int32) {
      fail("ids must be int32, got " + std::string(isa::name_of(m_in[1]->dtype)));
    }
    Dims out = dims(1);
    out.push_back(dims(0)[1]);
    return like(0, out);
  }

  // index_copy(dst [P, D], ids [N] int32, src [N, D]) -> dst's type.
  TensorType index_copy() const {
    need_rank(0, 2, "dst [P, D]");
    need_rank(1, 1, "ids [N]");
    need_rank(2, 2, "src [N, D]");
    if (m_in[1]->dtype != isa::DType::int32) {
      fail("ids must be int32, got " + std::string(isa::name_of(m_in[1]->dtype)));
    }
    if (m_in[2]->dtype != m_in[0]->dtype) fail("src and dst differ in dtype");
    if (!merge(dims(1)[0], dims(2)[0]) || !merge(dims(0)[1], dims(2)[1])) {
      fail("src " + to_string(dims(2)) + " must be " + to_string(Dims{dims(1)[0], dims(0)[1]}) +
           ": a row of dst per id");
    }
    return like(0, dims(0));
  }

  // decode_attention(q [B, D], k [N, D], v [N, D], ids [B, L] int32, bias [B, heads, L]?)
  // -> q's type.
  TensorType decode_attention() const {
    need_rank(0, 2, "q [B, D]");
    need_rank(1, 2, "k [N, D]");
    need_rank(2, 2, "v [N, D]");
    need_rank(3, 2, "ids [B, L]");
    const int64_t heads = required_int("heads");
    if (const double* s = m_n.real_attr("scale"); s && !(std::isfinite(*s) && *s > 0)) {
      fail("scale must be a positive number");
    }
    if (m_in[3]->dtype != isa::DType::int32) {
      fail("ids must be int32, got " + std::string(isa::name_of(m_in[3]->dtype)));
    }
    if (m_in[1]->dtype != m_in[2]->dtype) fail("k and v differ in dtype");
    const Dim d = same(same(dims(0)[1], dims(1)[1], "q and k differ in width"), dims(2)[1],
                       "q and v differ in width");
    same(dims(1)[0], dims(2)[0], "k and v differ in rows");
    same(dims(0)[0], dims(3)[0], "q and ids differ in sequences");
    if (d.kind == Dim::Kind::unknown) fail("the width D must be known");
    if (heads < 1 || d.size % heads != 0) {
      fail("heads " + std::to_string(heads) + " must divide the width " + std::to_string(d.size));
    }
    if (m_in.size() == 5) {
      need_rank(4, 3, "bias [B, heads, L]");
      if (!isa::is_float(m_in[4]->dtype)) fail("bias must be a float type");
      same(dims(4)[0], dims(0)[0], "bias and q differ in sequences");
      if (dims(4)[1].size != heads) {
        fail("bias " + to_string(dims(4)) + " must have " + std::to_string(heads) +
             " heads in dim 1");
      }
      same(dims(4)[2], dims(3)[1], "bias and ids differ in keys");
    }
    return *m_in[0];
  }

  // attention(q [Lq, D], k [Lk, D], v [Lk, D], mask?) -> q's type. The mask is int32 segment
  // ids [L] (a token attends only to its own segment; Lq = Lk = L) or a float bias [Lq, Lk].
  TensorType attention() const {
    // [Lq, D], or [B, Lq, D]: B sequences, each attending to its own keys ([B, Lk, D]).
    const bool batched = rank(0) == 3;
    need_rank(0, batched ? 3 : 2, "q [Lq, D] or [B, Lq, D]");
    need_rank(1, rank(0), batched ? "k [B, Lk, D]" : "k [Lk, D]");
    need_rank(2, rank(0), batched ? "v [B, Lk, D]" : "v [Lk, D]");
    const size_t r = batched ? 1 : 0;  // the rows' dim
    const int64_t heads = required_int("heads");
    if (const double* s = m_n.real_attr("scale"); s && !(std::isfinite(*s) && *s > 0)) {
      fail("scale must be a positive number");
    }
    if (m_in[1]->dtype != m_in[2]->dtype) fail("k and v differ in dtype");
    const Dim d = same(same(dims(0)[r + 1], dims(1)[r + 1], "q and k differ in width"),
                       dims(2)[r + 1], "q and v differ in width");
    same(dims(1)[r], dims(2)[r], "k and v differ in rows");
    for (size_t i = 0; i < m_in.size(); ++i) {
      for (const Dim& x : dims(i)) {
        if (x.kind != Dim::Kind::fixed) fail("attention needs static shapes");
      }
    }
    if (heads < 1 || d.size % heads != 0) {
      fail("heads " + std::to_string(heads) + " must divide the width " + std::to_string(d.size));
    }
    const int64_t lq = dims(0)[r].size, lk = dims(1)[r].size;
    if (batched) {
      same(same(dims(0)[0], dims(1)[0], "q and k differ in sequences"), dims(2)[0],
           "q and v differ in sequences");
      if (dims(0)[0].size > 1 && lq != lk) fail("several sequences need as many queries as keys");
      if (m_n.int_attr("seq")) fail("seq is implied by [B, L, D] operands");
    }
    const int64_t* causal = m_n.int_attr("causal");
    if (causal && *causal != 0 && *causal != 1) fail("causal must be 0 or 1");
    if (causal && *causal && lq != lk) fail("causal attention needs as many queries as keys");
    if (const int64_t* seq = m_n.int_attr("seq")) {
      if (*seq < 1 || lq % *seq != 0 || lk % *seq != 0) {
        fail("seq " + std::to_string(*seq) + " must divide the " + std::to_string(lq) +
             " queries and " + std::to_string(lk) + " keys");
      }
      if (lq != lk) fail("sequences of `seq` rows need as many queries as keys");
    }
    if (m_in.size() == 4) {
      if (m_in[3]->dtype == isa::DType::int32) {
        if (batched) fail("segment ids need [L, D] operands");
        need_rank(3, 1, "segment ids [L]");
        if (lq != lk || dims(3)[0].size != lq) {
          fail("segment ids " + to_string(dims(3)) + " must be [" + std::to_string(lq) +
               "], one per query and key");
        }
      } else {
        need_rank(3, 2, "bias [Lq, Lk] (every sequence's when batched)");
        if (!isa::is_float(m_in[3]->dtype)) fail("bias must be a float type");
        if (dims(3)[0].size != lq || dims(3)[1].size != lk) {
          fail("bias " + to_string(dims(3)) + " must be [" + std::to_string(lq) + ", " +
               std::to_string(lk) + "]");
        }
      }
    }
    return *m_in[0];
  }

  TensorType dynamic_update_slice() const {
    int64_t axis = 0;
    if (m_n.int_attr("axis")) axis = axis_in("axis", rank(0));
    const ScalarParam& pos = declared_scalar(required_text("scalar"));
    if (rank(1) != rank(0)) {
      fail("update " + to_string(dims(1)) + " must have the rank of dst " + to_string(dims(0)));
    }
    for (int64_t k = 0; k < rank(0); ++k) {
      if (k != axis && !merge(dims(0)[k], dims(1)[k])) {
        fail("update " + to_string(dims(1)) + " does not match dst " + to_string(dims(0)) +
             " in dim " + std::to_string(k));
      }
    }
    const Dim& rows = dims(1)[axis];
    const Dim& room = dims(0)[axis];
    if (rows.kind != Dim::Kind::fixed || room.kind == Dim::Kind::unknown) {
      fail("update " + to_string(dims(1)) + " and dst " + to_string(dims(0)) +
           " need a static update extent and a known dst extent along axis " +
           std::to_string(axis));
    }
    if (pos.max + rows.size > room.size) {
      fail("update of " + std::to_string(rows.size) + " rows at position '" + pos.name +
           "' (up to " + std::to_string(pos.max) + ") does not fit dst's " +
           std::to_string(room.size) + " rows along axis " + std::to_string(axis));
    }
    return *m_in[0];
  }

  const Graph& m_g;
  const Node& m_n;
  std::vector<const TensorType*> m_in;
  std::string m_path;
};

int64_t capped_elements(const Dims& dims) {
  int64_t n = 1;
  for (const Dim& d : dims) {
    if (d.kind == Dim::Kind::unknown) continue;
    if (d.size > 0 && n > kMaxElements / d.size) return kMaxElements + 1;
    n *= d.size;
  }
  return n;
}

std::string arity(const OpInfo& op) {
  if (op.min_inputs == op.max_inputs) {
    return std::to_string(op.min_inputs) + (op.min_inputs == 1 ? " input" : " inputs");
  }
  return std::to_string(op.min_inputs) + " to " + std::to_string(op.max_inputs) + " inputs";
}

void check_arity(const Node& n, const std::string& path) {
  const OpInfo& op = info(n.op);
  const int count = static_cast<int>(n.inputs.size());
  if (count < op.min_inputs || count > op.max_inputs) {
    throw InputError(path, "expects " + arity(op) + ", got " + std::to_string(count));
  }
}

// Node `n`'s output type from its inputs' types: its op's rules, its explicit dtype, the size cap.
TensorType output_type(const Graph& g, const Node& n, std::vector<const TensorType*> in,
                       const std::string& path) {
  TensorType t = NodeChecker(g, n, std::move(in), path).infer();
  if (n.dtype) t.dtype = *n.dtype;
  if (capped_elements(t.dims) > kMaxElements) {
    throw InputError(path, "output " + to_string(t) + " has more than 2^40 elements");
  }
  return t;
}

}  // namespace

std::string node_path(const Graph& g, size_t index) {
  return "nodes[" + std::to_string(index) + "] (op '" + std::string(info(g.nodes[index].op).name) +
         "')";
}

void infer_types(Graph& g) {
  for (size_t i = 0; i < g.scalars.size(); ++i) {
    const ScalarParam& s = g.scalars[i];
    std::string path = "scalars[" + std::to_string(i) + "]";
    if (s.name.empty()) throw InputError(path, "a scalar needs a name");
    if (g.find_scalar(s.name) != &s) throw InputError(path, "duplicate scalar '" + s.name + "'");
    if (s.min < 0 || s.min > s.max) {
      throw InputError(path, "needs 0 <= min <= max, got min " + std::to_string(s.min) +
                                 " and max " + std::to_string(s.max));
    }
  }

  std::unordered_map<int32_t, size_t> index_of;
  std::unordered_map<std::string, size_t> named;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    auto [it, fresh] = index_of.emplace(n.id, i);
    if (!fresh) {
      throw InputError(node_path(g, i), "duplicate id " + std::to_string(n.id) + " (also nodes[" +
                                            std::to_string(it->second) + "])");
    }
    if (n.name.empty()) {
      if (n.op == OpKind::input) throw InputError(node_path(g, i), "an input needs a name");
      continue;
    }
    auto [jt, unique] = named.emplace(n.name, i);
    if (!unique) {
      throw InputError(node_path(g, i), "duplicate name '" + n.name + "' (also nodes[" +
                                            std::to_string(jt->second) + "])");
    }
  }

  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    const std::string path = node_path(g, i);
    check_arity(n, path);
    std::vector<const TensorType*> in;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const int32_t id = n.inputs[k];
      auto it = index_of.find(id);
      std::string which = "inputs[" + std::to_string(k) + "] = " + std::to_string(id);
      if (it == index_of.end()) throw InputError(path, which + " is not a node id");
      if (it->second == i) throw InputError(path, which + " is the node itself");
      if (it->second > i) {
        throw InputError(path, which + " refers to a later node (nodes[" +
                                   std::to_string(it->second) +
                                   "]); nodes must be in topological order");
      }
      in.push_back(&g.nodes[it->second].type);
    }
    n.type = output_type(g, n, std::move(in), path);
  }

  if (g.outputs.empty()) throw InputError("outputs", "a graph needs at least one output");
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    std::string path = "outputs[" + std::to_string(k) + "]";
    if (!index_of.count(g.outputs[k])) {
      throw InputError(path, std::to_string(g.outputs[k]) + " is not a node id");
    }
    if (std::find(g.outputs.begin(), g.outputs.begin() + k, g.outputs[k]) !=
        g.outputs.begin() + k) {
      throw InputError(path, "duplicate output " + std::to_string(g.outputs[k]));
    }
  }
}

TensorType infer_node(const Graph& g, const Node& n) {
  const std::string path = "op '" + std::string(info(n.op).name) + "'";
  check_arity(n, path);
  std::vector<const TensorType*> in;
  for (int32_t id : n.inputs) {
    const Node* x = g.find(id);
    if (!x) throw InputError(path, "input " + std::to_string(id) + " is not a node id");
    in.push_back(&x->type);
  }
  return output_type(g, n, std::move(in), path);
}

bool has_unknown_dims(const Graph& g) {
  for (const Node& n : g.nodes) {
    for (const Dim& d : n.type.dims) {
      if (d.kind == Dim::Kind::unknown) return true;
    }
  }
  return false;
}

}  // namespace wallsim::compiler_stub
