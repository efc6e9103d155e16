// The expansion of composite ops into primitive ones (composites.h).
#include "wallsim/compiler_stub/composites.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <string>

#include "wallsim/base/params.h"
#include "wallsim/compiler_stub/validate.h"

namespace wallsim::compiler_stub {
namespace {

using Ints = std::vector<int64_t>;
using Attrs = std::map<std::string, AttrValue>;

// Appends the ops of one composite's expansion to `out`, each typed as it is added.
class Expander {
 public:
  Expander(Graph& out, const Node& composite, int32_t next_id)
      : m_out(out), m_c(composite), m_next(next_id) {}

  const TensorType& type(int32_t id) const { return m_out.find(id)->type; }
  const std::vector<int32_t>& emitted() const { return m_emitted; }
  int32_t next_id() const { return m_next; }

  int32_t emit(OpKind op, std::vector<int32_t> inputs, Attrs attrs = {},
               std::optional<isa::DType> dtype = std::nullopt) {
    Node n;
    n.id = m_next++;
    n.op = op;
    n.name = m_c.name;
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    n.dtype = dtype;
    n.type = infer_node(m_out, n);
    return push(std::move(n));
  }

  // A constant `value` of `dims` in `dtype`: iota along the last axis (the axis the lowering
  // makes it along), times 0 plus `value`, cast to `dtype` when that is not fp32.
  int32_t constant(const std::vector<Dim>& dims, double value, isa::DType dtype) {
    Node n;
    n.id = m_next++;
    n.op = OpKind::iota;
    n.name = m_c.name;
    n.attrs["axis"] = static_cast<int64_t>(dims.size()) - 1;
    n.type = {isa::DType::fp32, dims};
    n.type = infer_node(m_out, n);
    int32_t c = push(std::move(n));
    c = emit(OpKind::affine, {c}, {{"value", 0.0}, {"offset", value}});
    if (dtype != isa::DType::fp32) c = emit(OpKind::scale, {c}, {{"value", 1.0}}, dtype);
    return c;
  }

  int32_t reshape(int32_t x, const Ints& shape) {
    const std::vector<Dim>& d = type(x).dims;
    bool same = d.size() == shape.size();
    for (size_t k = 0; same && k < d.size(); ++k) {
      same = d[k].kind == Dim::Kind::fixed && d[k].size == shape[k];
    }
    return same ? x : emit(OpKind::reshape, {x}, {{"shape", shape}});
  }

  int32_t transpose(int32_t x, const Ints& perm) {
    for (size_t k = 0; k < perm.size(); ++k) {
      if (perm[k] != static_cast<int64_t>(k)) return emit(OpKind::transpose, {x}, {{"perm", perm}});
    }
    return x;
  }

  // Joined along `axis`, 16 inputs at most per concat (the IR's limit).
  int32_t concat(std::vector<int32_t> xs, int64_t axis) {
    while (xs.size() > 16) {
      std::vector<int32_t> head(xs.begin(), xs.begin() + 16);
      xs.erase(xs.begin(), xs.begin() + 16);
      xs.insert(xs.begin(), emit(OpKind::concat, head, {{"axis", axis}}));
    }
    return xs.size() == 1 ? xs[0] : emit(OpKind::concat, xs, {{"axis", axis}});
  }

 private:
  int32_t push(Node n) {
    m_emitted.push_back(n.id);
    m_out.nodes.push_back(std::move(n));
    return m_out.nodes.back().id;
  }

  Graph& m_out;
  const Node& m_c;
  int32_t m_next;
  std::vector<int32_t> m_emitted;
};

Ints static_shape(const std::vector<Dim>& dims) {
  Ints s;
  for (const Dim& d : dims) s.push_back(d.size);
  return s;
}

bool all_fixed(const std::vector<Dim>& dims) {
  return std::all_of(dims.begin(), dims.end(),
                     [](const Dim& d) { return d.kind == Dim::Kind::fixed; });
}

// pad: per padded axis k, a concat of constant blocks and x along k. Along the last axis of a
// value of rank > 2 the concat is made on the [rows, axis] view of x instead (a reshape of a
// row-major value is free): the lowering tiles a value's rows per its innermost batch, so a
// concat of [N, C, H, W] pieces along W loads each piece as H-row tiles, one per channel (960
// of them in mobilenet_v2's last blocks), more than SBUF holds; the 2-D view loads N C H rows
// in full tiles.
int32_t expand_pad(Expander& e, const Node& n, int32_t x) {
  const Ints& begin = *n.ints_attr("begin");
  const Ints& end = *n.ints_attr("end");
  const double* v = n.real_attr("value");
  const double value = v ? *v : 0.0;
  const isa::DType dtype = e.type(x).dtype;
  for (size_t k = 0; k < begin.size(); ++k) {
    if (!begin[k] && !end[k]) continue;
    const std::vector<Dim> dims = e.type(x).dims;
    if (k + 1 == dims.size() && dims.size() > 2 && all_fixed(dims)) {
      const Ints s = static_shape(dims);
      const int64_t outer = std::accumulate(s.begin(), s.end() - 1, int64_t{1},
                                            [](int64_t a, int64_t b) { return a * b; });
      std::vector<int32_t> parts;
      if (begin[k]) parts.push_back(e.constant({Dim::of(outer), Dim::of(begin[k])}, value, dtype));
      parts.push_back(e.reshape(x, {outer, s[k]}));
      if (end[k]) parts.push_back(e.constant({Dim::of(outer), Dim::of(end[k])}, value, dtype));
      Ints out = s;
      out[k] += begin[k] + end[k];
      x = e.reshape(e.concat(parts, 1), out);
      continue;
    }
    auto block = [&](int64_t size) {
      std::vector<Dim> b = dims;
      b[k] = Dim::of(size);
      return e.constant(b, value, dtype);
    };
    std::vector<int32_t> parts;
    if (begin[k]) parts.push_back(block(begin[k]));
    parts.push_back(x);
    if (end[k]) parts.push_back(block(end[k]));
    x = e.concat(parts, static_cast<int64_t>(k));
  }
  return x;
}

// reduce: the reduced axes moved last (in order) and flattened into one, reduced by the
// last-axis reduction, reshaped to the result.
int32_t expand_reduce(Expander& e, const Node& n, int32_t x) {
  const std::string& r = *n.text_attr("reduction");
  const OpKind op = r == "sum"   ? OpKind::reduce_sum
                    : r == "max" ? OpKind::reduce_max
                                 : OpKind::reduce_mean;
  const std::vector<Dim>& dims = e.type(x).dims;
  const int64_t rank = static_cast<int64_t>(dims.size());
  const std::vector<bool> reduced = reduced_axes(n, rank);
  Ints perm, kept;
  for (int64_t k = 0; k < rank; ++k) {
    if (!reduced[k]) {
      perm.push_back(k);
      kept.push_back(dims[k].size);
    }
  }
  int64_t inner = 1;
  for (int64_t k = 0; k < rank; ++k) {
    if (reduced[k]) {
      perm.push_back(k);
      inner *= dims[k].size;
    }
  }
  int32_t t = e.transpose(x, perm);
  Ints flat = kept;
  flat.push_back(inner);
  t = e.emit(op, {e.reshape(t, flat)});
  return e.reshape(t, static_shape(n.type.dims));
}

}  // namespace

std::vector<bool> reduced_axes(const Node& n, int64_t rank) {
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  const Ints* axes = n.ints_attr("axes");
  if (!axes) reduced.assign(reduced.size(), true);
  for (int64_t a : axes ? *axes : Ints{}) {
    const int64_t k = a < 0 ? a + rank : a;
    if (k >= 0 && k < rank) reduced[k] = true;
  }
  return reduced;
}

bool has_composites(const Graph& g) {
  return std::any_of(g.nodes.begin(), g.nodes.end(),
                     [](const Node& n) { return info(n.op).kind == OpClass::composite; });
}

Graph expand_composites(const Graph& g,
                        std::vector<std::pair<int32_t, std::vector<int32_t>>>* expanded) {
  if (!has_composites(g)) return g;
  Graph out;
  out.name = g.name;
  out.scalars = g.scalars;
  out.outputs = g.outputs;
  out.nodes.reserve(g.nodes.size());
  int32_t next = 0;
  for (const Node& n : g.nodes) next = std::max(next, n.id + 1);
  std::map<int32_t, int32_t> alias;  // a composite that changes nothing -> its operand
  auto operand = [&](int32_t id) {
    auto it = alias.find(id);
    return it == alias.end() ? id : it->second;
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node n = g.nodes[i];
    for (int32_t& in : n.inputs) in = operand(in);
    if (info(n.op).kind != OpClass::composite) {
      out.nodes.push_back(std::move(n));
      continue;
    }
    Expander e(out, n, next);
    int32_t r = -1;
    try {
      r = n.op == OpKind::pad ? expand_pad(e, n, n.inputs[0]) : expand_reduce(e, n, n.inputs[0]);
      // A composite that changes nothing is its operand, unless it is a graph output (then it
      // needs a value of its own: a reshape to the same shape, a copy).
      if (r == n.inputs[0] &&
          std::find(g.outputs.begin(), g.outputs.end(), n.id) != g.outputs.end()) {
        r = e.emit(OpKind::reshape, {r}, {{"shape", static_shape(n.type.dims)}});
      }
    } catch (const base::InputError& err) {
      throw base::InputError(node_path(g, i), std::string("cannot expand: ") + err.what());
    }
    next = e.next_id();
    std::vector<int32_t> ids = e.emitted();
    if (r == n.inputs[0]) {
      alias[n.id] = r;
    } else {
      Node& last = out.nodes.back();  // every builder's result is the last node it adds
      last.id = n.id;
      last.output_name = n.output_name;
      ids.back() = n.id;
    }
    if (expanded) expanded->emplace_back(n.id, std::move(ids));
  }
  return out;
}

}  // namespace wallsim::compiler_stub
