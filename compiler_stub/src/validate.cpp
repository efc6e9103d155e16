// Graph validation and shape inference for every op of ops.def: the graph in order, arity and
// size caps, and the node rules for attributes, element-wise ops, matmuls and norms (the
// others: validate_layout.cpp, validate_indirect.cpp).
#include "wallsim/compiler_stub/validate.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <unordered_map>

#include "shape_rules.h"

namespace wallsim::compiler_stub {
namespace shape_rules {

TensorType NodeChecker::infer() {
  check_attrs();
  switch (m_n.op) {
    case OpKind::input:
    case OpKind::iota:
      return declared();
    case OpKind::recv:
      point_to_point();
      return declared();
    case OpKind::send:
      return point_to_point();
    case OpKind::matmul:
      return matmul();
    case OpKind::batch_matmul:
      return batch_matmul();
    case OpKind::bias_add:
      return bias_add();
    case OpKind::scale:
      required_real("value");
      return *m_in[0];
    default:
      break;
  }
  // The rest by their kind in ops.def: one operand element-wise keeps its type; two broadcast.
  switch (info(m_n.op).kind) {
    case OpClass::unary:
    case OpClass::activation:
      return *m_in[0];
    case OpClass::binary:
      return like(0, broadcast_all({0, 1}));
    default:
      break;
  }
  switch (m_n.op) {
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
    case OpKind::all_reduce:
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
      return collective();
    case OpKind::pad:
      return pad();
    case OpKind::reduce:
      return reduce();
    default:
      break;
  }
  fail("unhandled op");
}

void NodeChecker::check_attrs() const {
  const bool declares = m_n.op == OpKind::input || m_n.op == OpKind::iota || m_n.op == OpKind::recv;
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
    fail("explicit dtype " + std::string(isa::name_of(*m_n.dtype)) + " differs from the declared " +
         std::string(isa::name_of(m_n.type.dtype)) + " (input, iota and recv declare their type)");
  }
}

int64_t NodeChecker::required_int(const std::string& key) const {
  const int64_t* v = m_n.int_attr(key);
  if (!v) fail("missing attribute '" + key + "'");
  return *v;
}

double NodeChecker::required_real(const std::string& key) const {
  const double* v = m_n.real_attr(key);
  if (!v) fail("missing attribute '" + key + "'");
  return *v;
}

const std::string& NodeChecker::required_text(const std::string& key) const {
  const std::string* v = m_n.text_attr(key);
  if (!v) fail("missing attribute '" + key + "'");
  return *v;
}

const std::vector<int64_t>& NodeChecker::required_ints(const std::string& key) const {
  const std::vector<int64_t>* v = m_n.ints_attr(key);
  if (!v) fail("missing attribute '" + key + "'");
  return *v;
}

const ScalarParam& NodeChecker::declared_scalar(const std::string& name) const {
  const ScalarParam* s = m_g.find_scalar(name);
  if (!s) fail("scalar '" + name + "' is not declared in the graph's scalars");
  return *s;
}

int64_t NodeChecker::axis_in(const std::string& key, int64_t r) const {
  int64_t a = required_int(key);
  if (a < 0 || a >= r) {
    fail(key + " " + std::to_string(a) + " is out of range for rank " + std::to_string(r));
  }
  return a;
}

void NodeChecker::need_rank_at_least(size_t i, int64_t r) const {
  if (rank(i) < r) {
    fail(std::string(kInputNames[i]) + " input must have rank >= " + std::to_string(r) + ", got " +
         to_string(dims(i)));
  }
}

void NodeChecker::need_rank(size_t i, int64_t r, const char* what) const {
  if (rank(i) != r) {
    fail(std::string(what) + " must have rank " + std::to_string(r) + ", got " +
         to_string(dims(i)));
  }
}

Dim NodeChecker::same(const Dim& a, const Dim& b, const std::string& what) const {
  auto d = merge(a, b);
  if (!d) fail(what + ": " + to_string(a) + " vs " + to_string(b));
  return *d;
}

TensorType NodeChecker::declared() const {
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

Dims NodeChecker::broadcast_all(std::initializer_list<size_t> which) const {
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

TensorType NodeChecker::matmul() const {
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

TensorType NodeChecker::batch_matmul() const {
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

TensorType NodeChecker::bias_add() const {
  need_rank_at_least(0, 1);
  if (rank(1) != 1 || !merge(dims(0).back(), dims(1)[0])) {
    fail("bias must be [N] with N the last dim of " + to_string(dims(0)) + ", got " +
         to_string(dims(1)));
  }
  return *m_in[0];
}

TensorType NodeChecker::norm() const {
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

TensorType NodeChecker::compare() const {
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

}  // namespace shape_rules

namespace {

using shape_rules::Dims;
using shape_rules::InputError;
using shape_rules::kMaxElements;
using shape_rules::NodeChecker;

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

// A value's tensor name is a file name in exec's outputs/: letters, digits, '_', '-' and '.'
// (not first), and never another value's name (an input's, or v<digits>).
namespace {

bool is_tensor_file_name(const std::string& s) {
  if (s.empty() || s.size() > 200 || s[0] == '.' || s[0] == '-') return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

bool is_id_name(const std::string& s) {
  return s.size() > 1 && s[0] == 'v' &&
         std::all_of(s.begin() + 1, s.end(), [](char c) { return std::isdigit(c) != 0; });
}

void check_output_names(const Graph& g) {
  std::unordered_map<std::string, size_t> taken;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].op == OpKind::input) taken.emplace(g.nodes[i].name, i);
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.output_name.empty()) continue;
    const std::string path = node_path(g, i);
    const std::string& s = n.output_name;
    if (n.op == OpKind::input || info(n.op).result == OpResult::in_place) {
      throw InputError(path, "output_name '" + s + "' on an input or an in-place result");
    }
    if (std::find(g.outputs.begin(), g.outputs.end(), n.id) == g.outputs.end()) {
      throw InputError(path, "output_name '" + s + "' on a node that is not a graph output");
    }
    if (!is_tensor_file_name(s) || is_id_name(s)) {
      throw InputError(path, "output_name '" + s +
                                 "' is not a tensor name (letters, digits, '_', '-', '.', not "
                                 "first; not v<digits>)");
    }
    auto [it, fresh] = taken.emplace(s, i);
    if (!fresh) {
      throw InputError(path, "output_name '" + s + "' is also the name of nodes[" +
                                 std::to_string(it->second) + "]");
    }
  }
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
  check_output_names(g);
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
