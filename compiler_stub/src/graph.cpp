// The graph IR's tables and small accessors: op info from ops.def, attribute kinds, types.
#include "wallsim/compiler_stub/graph.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>
#include <string>

namespace wallsim::compiler_stub {
namespace {

constexpr OpInfo kOps[] = {
#define WALLSIM_GRAPH_OP(name, min_in, max_in, attrs, window, result, kind, act, fill, onnx, aten, \
                         summary)                                                                  \
  {#name,                                                                                          \
   min_in,                                                                                         \
   max_in,                                                                                         \
   attrs,                                                                                          \
   RowWindow::window,                                                                              \
   OpResult::result,                                                                               \
   OpClass::kind,                                                                                  \
   isa::ActFn::act,                                                                                \
   fill,                                                                                           \
   onnx,                                                                                           \
   aten,                                                                                           \
   summary},
#include "wallsim/compiler_stub/ops.def"
#undef WALLSIM_GRAPH_OP
};

template <class T>
const T* attr_as(const std::map<std::string, AttrValue>& attrs, const std::string& key) {
  auto it = attrs.find(key);
  return it == attrs.end() ? nullptr : std::get_if<T>(&it->second);
}

}  // namespace

const OpInfo& info(OpKind op) { return kOps[static_cast<size_t>(op)]; }

bool OpInfo::elementwise() const {
  return kind == OpClass::binary || kind == OpClass::unary || kind == OpClass::activation ||
         kind == OpClass::elementwise;
}

std::optional<float> OpInfo::bounded_fill() const {
  if (fill.empty()) return std::nullopt;
  return std::stof(std::string(fill));
}

std::optional<OpKind> parse_op(std::string_view name) {
  for (size_t i = 0; i < std::size(kOps); ++i) {
    if (kOps[i].name == name) return static_cast<OpKind>(i);
  }
  return std::nullopt;
}

bool accepts_attr(OpKind op, std::string_view attr) {
  std::string_view list = info(op).attrs;
  while (!list.empty()) {
    size_t end = list.find(' ');
    std::string_view word = list.substr(0, end);
    if (word == attr) return true;
    if (end == std::string_view::npos) break;
    list.remove_prefix(end + 1);
  }
  return false;
}

std::optional<AttrKind> attr_kind(std::string_view attr) {
  if (attr == "axis" || attr == "start" || attr == "limit" || attr == "transpose_b" ||
      attr == "heads" || attr == "causal" || attr == "seq" || attr == "ranks" || attr == "peer" ||
      attr == "keepdim") {
    return AttrKind::integer;
  }
  if (attr == "value" || attr == "eps" || attr == "scale" || attr == "lo" || attr == "hi" ||
      attr == "offset") {
    return AttrKind::real;
  }
  if (attr == "cmp" || attr == "scalar" || attr == "comm" || attr == "reduction")
    return AttrKind::text;
  if (attr == "perm" || attr == "shape" || attr == "kernel" || attr == "strides" ||
      attr == "dilations" || attr == "begin" || attr == "end" || attr == "axes") {
    return AttrKind::ints;
  }
  return std::nullopt;
}

std::string_view name_of(AttrKind kind) {
  switch (kind) {
    case AttrKind::integer:
      return "an integer";
    case AttrKind::real:
      return "a number";
    case AttrKind::text:
      return "a string";
    case AttrKind::ints:
      return "an array of integers";
  }
  return "?";
}

std::string_view name_of(InputRole role) { return role == InputRole::weight ? "weight" : "input"; }

std::optional<InputRole> parse_role(std::string_view s) {
  if (s == "input") return InputRole::input;
  if (s == "weight") return InputRole::weight;
  return std::nullopt;
}

double contraction_macs(const TensorType& a, const TensorType& out) {
  double elements = 1;
  for (const Dim& d : out.dims) elements *= double(d.size);
  return elements * double(a.dims.back().size);
}

double node_macs(const Graph& g, const Node& n) {
  const auto type = [&](size_t i) -> const TensorType& { return g.find(n.inputs[i])->type; };
  if (info(n.op).kind == OpClass::contraction) return contraction_macs(type(0), n.type);
  if (info(n.op).kind == OpClass::attention) {
    // q.k and p.v, each query row against the keys it may see: its sequence's `seq` rows, else
    // every key (a causal or segment mask is data: the dense work is the same).
    const TensorType& q = type(0);
    const size_t r = q.dims.size() - 2;  // the rows' dim of [Lq, D] or [B, Lq, D]
    double rows = 1;
    for (size_t i = 0; i <= r; ++i) rows *= double(q.dims[i].size);
    const int64_t* seq = n.int_attr("seq");
    const double keys = seq ? double(*seq) : double(type(1).dims[r].size);
    return 2.0 * rows * keys * double(q.dims.back().size);
  }
  if (n.op == OpKind::decode_attention) {  // q [B, D] against the L keys of ids [B, L] each
    const TensorType& q = type(0);
    return 2.0 * double(q.dims[0].size) * double(type(3).dims[1].size) * double(q.dims[1].size);
  }
  return 0;
}

int64_t TensorType::elements() const {
  int64_t n = 1;
  for (const Dim& d : dims) {
    if (d.kind == Dim::Kind::unknown) return -1;
    n *= d.size;
  }
  return n;
}

std::string to_string(const Dim& d) {
  switch (d.kind) {
    case Dim::Kind::fixed:
      return std::to_string(d.size);
    case Dim::Kind::bounded:
      return d.scalar + "<=" + std::to_string(d.size);
    case Dim::Kind::unknown:
      return "?";
  }
  return "?";
}

std::string to_string(const std::vector<Dim>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += to_string(dims[i]);
  }
  return s + "]";
}

std::string to_string(const TensorType& t) {
  return std::string(isa::name_of(t.dtype)) + to_string(t.dims);
}

const int64_t* Node::int_attr(const std::string& key) const { return attr_as<int64_t>(attrs, key); }
const double* Node::real_attr(const std::string& key) const { return attr_as<double>(attrs, key); }
const std::string* Node::text_attr(const std::string& key) const {
  return attr_as<std::string>(attrs, key);
}
const std::vector<int64_t>* Node::ints_attr(const std::string& key) const {
  return attr_as<std::vector<int64_t>>(attrs, key);
}

double norm_eps(const Node& n) {
  const double* e = n.real_attr("eps");
  return e ? *e : kDefaultNormEps;
}

double attention_scale(const Node& n) {
  if (const double* s = n.real_attr("scale")) return *s;
  const int64_t* heads = n.int_attr("heads");
  const int64_t width = n.type.dims.empty() ? 1 : n.type.dims.back().size;
  return 1.0 / std::sqrt(double(width / std::max<int64_t>(1, heads ? *heads : 1)));
}

const Node* Graph::find(int32_t id) const {
  // Ids usually equal positions; else nodes sorted by id (a group's graph copied out for a
  // rewrite) are searched by halves; fall back to a scan.
  if (id >= 0 && static_cast<size_t>(id) < nodes.size() && nodes[id].id == id) return &nodes[id];
  auto it = std::lower_bound(nodes.begin(), nodes.end(), id,
                             [](const Node& n, int32_t x) { return n.id < x; });
  if (it != nodes.end() && it->id == id) return &*it;
  for (const Node& n : nodes) {
    if (n.id == id) return &n;
  }
  return nullptr;
}

Node* Graph::find(int32_t id) {
  return const_cast<Node*>(static_cast<const Graph&>(*this).find(id));
}

const ScalarParam* Graph::find_scalar(const std::string& name) const {
  for (const ScalarParam& s : scalars) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

}  // namespace wallsim::compiler_stub
