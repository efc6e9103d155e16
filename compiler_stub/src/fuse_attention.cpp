// Attention spelt out in ops, recognised and rewritten into the fused `attention` op before a
// group is lowered: what captured PyTorch programs, ONNX imports and hand-written graphs emit.
//
// The form recognised, per match (every name a node of the group):
//   S = batch_matmul(Qh, Kh, transpose_b) [B H, Lq, Lk], or batch_matmul(Qh, Kh^T)
//   S -> { reshape | scale | affine without offset | add of a mask | select with a mask }* ->
//   softmax (over the last axis, Lk) -> { reshape }* -> P;  O = batch_matmul(P, Vh) [B H, Lq, dh]
//   O -> { reshape | transpose }* -> out
// where Qh, Kh, Vh are head views (reshape, transpose and scale only) of values q, k, v of
// shape [B Lq, D] or [B, Lq, D] (D = H dh, head h in columns h dh ..): checked by following
// every element's offset through the views, not by matching shapes, so any order of reshapes
// and transposes that lands on the same elements qualifies. `out` must hold O's elements in
// q's row-major order ([B, Lq, H, dh]). Every node of S .. out but `out` has one reader, in
// the group, and is not a graph output.
// Masks (one at most), in the positions [.., Lq, Lk] of the scores:
//  - causal, from iota and compare (key index > query index masked, or <= kept): an addend
//    scale(compare, c) / affine(compare, c), or a select between the scores and a constant
//    fill (affine(iota | compare, 0, c), or c times the opposite compare); the masked value
//    (times any scale after it) must be at most kMaskedAtMost: then the unfused softmax gives
//    a masked key exactly zero weight in fp32 (e^-x underflows beyond x = 104) unless the row's
//    scores spread over more than 1e9 - 104, as the fused op's own -2^30 does. Index values
//    must be exact: iota in int32 or fp32, or bf16 up to 256 positions;
//  - any other float addend broadcast over the batch and heads ([1.., Lq, Lk]): a dense bias,
//    applied exactly (no scale may follow it; not with several sequences in [B Lq, D] rows).
// The decision uses shapes and attributes only, never data values. Anything else is left as
// it is: the group is lowered op by op.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "group_rewrite.h"
#include "wallsim/base/params.h"
#include "wallsim/compiler_stub/validate.h"

namespace wallsim::compiler_stub {
namespace {

constexpr double kMaskedAtMost = -1e9;

// Where each element of a value lies in a base value's row-major elements: per dim, sub-dims
// (size, stride) outermost first (the lowering's views, lowering/views.cpp, in the same form).
struct SubDim {
  int64_t size, stride;
  bool operator==(const SubDim& o) const { return size == o.size && stride == o.stride; }
};
using SubDims = std::vector<SubDim>;
using ViewMap = std::vector<SubDims>;

// Without size-1 sub-dims, adjacent ones merged where contiguous: one form per mapping.
SubDims canon(const SubDims& in) {
  SubDims out;
  for (const SubDim& s : in) {
    if (s.size == 1) continue;
    if (!out.empty() && out.back().stride == s.size * s.stride) {
      out.back() = {out.back().size * s.size, s.stride};
    } else {
      out.push_back(s);
    }
  }
  return out;
}
SubDims flat(const ViewMap& v) {
  SubDims all;
  for (const SubDims& d : v) all.insert(all.end(), d.begin(), d.end());
  return canon(all);
}

ViewMap row_major(const std::vector<Dim>& dims) {
  ViewMap v(dims.size());
  int64_t stride = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    v[i] = {{dims[i].size, stride}};
    stride *= dims[i].size;
  }
  return v;
}

// A reshape: the same elements in order, regrouped into `dims`; nullopt when a new dim would
// split a sub-dim unevenly.
std::optional<ViewMap> regroup(const ViewMap& v, const std::vector<Dim>& dims) {
  SubDims all = flat(v);
  std::reverse(all.begin(), all.end());  // innermost first, consumed from the back
  ViewMap out(dims.size());
  for (size_t i = dims.size(); i-- > 0;) {
    int64_t need = dims[i].size;
    SubDims group;
    while (need > 1) {
      if (all.empty()) return std::nullopt;
      SubDim& f = all.front();
      if (f.size <= need) {
        if (need % f.size) return std::nullopt;
        group.insert(group.begin(), f);
        need /= f.size;
        all.erase(all.begin());
      } else {
        if (f.size % need) return std::nullopt;
        group.insert(group.begin(), {need, f.stride});
        f = {f.size / need, f.stride * need};
        need = 1;
      }
    }
    out[i] = group;
  }
  if (!all.empty()) return std::nullopt;
  return out;
}

// Follows one layout node (reshape or transpose; scale moves no element).
std::optional<ViewMap> follow(const ViewMap& v, const Node& n) {
  if (n.op == OpKind::reshape) return regroup(v, n.type.dims);
  if (n.op == OpKind::transpose) {
    const auto* perm = n.ints_attr("perm");
    if (!perm || perm->size() != v.size()) return std::nullopt;
    ViewMap out;
    for (int64_t p : *perm) {
      if (p < 0 || p >= static_cast<int64_t>(v.size())) return std::nullopt;
      out.push_back(v[static_cast<size_t>(p)]);
    }
    return out;
  }
  return v;
}

// scale(x, v) and affine(x, v) without an offset: x times v.
std::optional<double> factor_of(const Node& n) {
  if (n.op == OpKind::scale) return n.real_attr("value") ? *n.real_attr("value") : 1.0;
  if (n.op == OpKind::affine) {
    const double* off = n.real_attr("offset");
    if (off && *off != 0) return std::nullopt;
    return n.real_attr("value") ? *n.real_attr("value") : 1.0;
  }
  return std::nullopt;
}

class Matcher {
 public:
  Matcher(const Graph& g, const std::vector<int32_t>& group, const GraphUses& uses)
      : m_g(g), m_uses(uses), m_in_group(group.begin(), group.end()) {}

  // The match whose scores are `bmm`, if the form above holds.
  std::optional<AttentionMatch> match(const Node& bmm) {
    AttentionMatch m;
    if (bmm.inputs.size() != 2 || bmm.type.dims.size() != 3) return std::nullopt;
    const int64_t bt = bmm.type.dims[0].size;
    m.lq = bmm.type.dims[1].size;
    m.lk = bmm.type.dims[2].size;
    double factor = 1;
    std::vector<const Node*> qchain, kchain;
    const Node* q = base_of(bmm.inputs[0], qchain, factor);
    const Node* k = base_of(bmm.inputs[1], kchain, factor);
    if (!q || !k || q->type.dims.size() < 2 || k->type.dims.size() != q->type.dims.size()) {
      return std::nullopt;
    }
    const TensorType& qa = node(bmm.inputs[0]).type;
    const int64_t dh = qa.dims.back().size, D = q->type.dims.back().size;
    if (dh <= 0 || D % dh || bt % (D / dh)) return std::nullopt;
    const int64_t H = D / dh, B = bt / H;
    m.heads = H;
    if (!is_heads(q, qchain, B, H, m.lq, dh, false)) return std::nullopt;
    if (!is_heads(k, kchain, B, H, m.lk, dh, !transpose_b(bmm))) return std::nullopt;
    m.q = q->id;
    m.k = k->id;
    for (const Node* n : qchain) m.views.push_back(n->id);
    for (const Node* n : kchain) m.views.push_back(n->id);

    // The scores to the softmax.
    m.core.push_back(bmm.id);
    const Node* cur = &bmm;
    std::optional<double> masked;  // the masked scores' value, once a causal mask is seen
    bool mask_seen = false, bias_seen = false;
    const Node* n = nullptr;
    while (true) {
      n = only_reader(*cur);
      if (!n || !scores_shaped(*n, bt * m.lq * m.lk, m.lk)) return std::nullopt;
      if (n->op == OpKind::softmax) break;
      if (n->op == OpKind::reshape) {
      } else if (auto f = factor_of(*n)) {
        if (bias_seen) return std::nullopt;
        factor *= *f;
        if (masked) *masked *= *f;
      } else if (n->op == OpKind::add || n->op == OpKind::select) {
        if (mask_seen) return std::nullopt;
        mask_seen = true;
        if (!mask(*n, cur->id, m, masked)) return std::nullopt;
        bias_seen = m.bias >= 0;
      } else {
        return std::nullopt;
      }
      m.core.push_back(n->id);
      cur = n;
    }
    if (masked && !(*masked <= kMaskedAtMost)) return std::nullopt;
    if (!(factor > 0) || !std::isfinite(factor)) return std::nullopt;
    m.scale = factor;
    m.core.push_back(n->id);  // the softmax
    cur = n;
    // The probabilities to P.V.
    const Node* pv = nullptr;
    while (true) {
      n = only_reader(*cur);
      if (!n) return std::nullopt;
      if (n->op == OpKind::batch_matmul && n->inputs.size() == 2 && n->inputs[0] == cur->id &&
          n->inputs[1] != cur->id && !transpose_b(*n)) {
        pv = n;
        break;
      }
      if (n->op != OpKind::reshape || !scores_shaped(*n, bt * m.lq * m.lk, m.lk)) {
        return std::nullopt;
      }
      m.core.push_back(n->id);
      cur = n;
    }
    if (node(pv->inputs[0]).type.dims != bmm.type.dims) return std::nullopt;
    std::vector<const Node*> vchain;
    double vfactor = 1;
    const Node* v = base_of(pv->inputs[1], vchain, vfactor);
    if (!v || vfactor != 1 || v->type.dims != k->type.dims) return std::nullopt;
    if (!is_heads(v, vchain, B, H, m.lk, dh, false)) return std::nullopt;
    m.v = v->id;
    for (const Node* x : vchain) m.views.push_back(x->id);

    // O's elements in q's row-major order [B, Lq, H, dh]: O is [B H, Lq, dh].
    const SubDims want = canon({{B, H * m.lq * dh}, {m.lq, dh}, {H, m.lq * dh}, {dh, 1}});
    ViewMap o = row_major(pv->type.dims);
    const Node* out = flat(o) == want ? pv : nullptr;
    std::vector<int32_t> path;
    for (const Node* x = pv;;) {
      const Node* r = only_reader(*x);
      if (!r || (r->op != OpKind::reshape && r->op != OpKind::transpose)) break;
      auto next = follow(o, *r);
      if (!next) break;
      o = *next;
      path.push_back(x->id);
      x = r;
      if (flat(o) == want) {
        out = x;
        m.core.insert(m.core.end(), path.begin(), path.end());
        path.clear();
      }
    }
    if (!out) return std::nullopt;
    m.out = out->id;
    if (out->type.dtype != q->type.dtype || k->type.dtype != v->type.dtype) return std::nullopt;
    // The op's operands: [B Lq, D] rows (several sequences of `seq` rows) or [B, Lq, D].
    const auto& qd = q->type.dims;
    if (qd.size() == 2) {
      if (qd[0].size != B * m.lq || k->type.dims[0].size != B * m.lk) return std::nullopt;
      if (B > 1) {
        if (m.lq != m.lk || m.bias >= 0) return std::nullopt;
        m.seq = m.lq;
      }
    } else if (qd.size() == 3) {
      if (qd[0].size != B || qd[1].size != m.lq || k->type.dims[1].size != m.lk) {
        return std::nullopt;
      }
      if (B > 1 && m.lq != m.lk) return std::nullopt;
    } else {
      return std::nullopt;
    }
    if (m.causal && m.lq != m.lk) return std::nullopt;
    m.out_reshape = out->type.dims != qd;
    return m;
  }

 private:
  const Node& node(int32_t id) const { return *m_g.find(id); }
  static bool transpose_b(const Node& bmm) {
    const int64_t* t = bmm.int_attr("transpose_b");
    return t && *t != 0;
  }
  bool in_group(int32_t id) const { return m_in_group.count(id) != 0; }
  // The one reader of `n`, in the group, when `n` is not read after the group.
  const Node* only_reader(const Node& n) const {
    const auto& rs = m_uses.consumers(n.id);
    if (m_uses.is_output(n.id) || rs.size() != 1 || !in_group(rs[0])) return nullptr;
    const Node* r = m_g.find(rs[0]);
    return r && std::count(r->inputs.begin(), r->inputs.end(), n.id) == 1 ? r : nullptr;
  }
  static bool scores_shaped(const Node& n, int64_t elements, int64_t lk) {
    return !n.type.dims.empty() && n.type.dims.back().size == lk && n.type.elements() == elements &&
           isa::is_float(n.type.dtype);
  }

  // The value behind the reshapes, transposes and scales of `id` in the group, the chain from
  // it to `id`, and the scales' product.
  const Node* base_of(int32_t id, std::vector<const Node*>& chain, double& factor) const {
    const Node* n = m_g.find(id);
    while (n && in_group(n->id) &&
           (n->op == OpKind::reshape || n->op == OpKind::transpose || factor_of(*n))) {
      if (auto f = factor_of(*n)) factor *= *f;
      chain.insert(chain.begin(), n);
      n = m_g.find(n->inputs[0]);
    }
    return n;
  }
  // Whether the chain from `base` ([B L, D] rows) ends at [B H, L, dh] (or [B H, dh, L] when
  // `transposed`) with head h of sequence b at batch index b H + h.
  bool is_heads(const Node* base, const std::vector<const Node*>& chain, int64_t B, int64_t H,
                int64_t L, int64_t dh, bool transposed) const {
    const int64_t D = H * dh;
    if (base->type.elements() != B * L * D || base->type.dims.back().size != D) return false;
    ViewMap v = row_major(base->type.dims);
    for (const Node* n : chain) {
      auto next = follow(v, *n);
      if (!next) return false;
      v = *next;
    }
    if (v.size() != 3) return false;
    const SubDims rows = canon({{L, D}}), cols = canon({{dh, 1}});
    return canon(v[0]) == canon({{B, L * D}, {H, dh}}) && canon(v[transposed ? 2 : 1]) == rows &&
           canon(v[transposed ? 1 : 2]) == cols;
  }

  // The index an iota holds along the scores' last two dims: 1 = the query, 0 = the key.
  std::optional<int> position(int32_t id, int64_t lq, int64_t lk) const {
    const Node& n = node(id);
    if (n.op != OpKind::iota) return std::nullopt;
    const int64_t r = static_cast<int64_t>(n.type.dims.size());
    const int64_t* a = n.int_attr("axis");
    const int64_t axis = a ? *a : 0;
    if (axis < 0 || axis >= r) return std::nullopt;
    const int64_t from_end = r - 1 - axis;
    const int64_t len = n.type.dims[static_cast<size_t>(axis)].size;
    if (from_end > 1 || len != (from_end ? lq : lk)) return std::nullopt;
    const isa::DType dt = n.type.dtype;
    const int64_t exact = dt == isa::DType::int32  ? (int64_t{1} << 31)
                          : dt == isa::DType::fp32 ? (int64_t{1} << 24)
                          : dt == isa::DType::bf16 ? 256
                                                   : 0;
    if (len > exact) return std::nullopt;
    return static_cast<int>(from_end);
  }
  // Whether compare `id` is 1 exactly where key > query (future) or key <= query (!future).
  std::optional<bool> causal_compare(int32_t id, int64_t lq, int64_t lk) const {
    const Node& c = node(id);
    if (c.op != OpKind::compare || c.inputs.size() != 2 || !c.text_attr("cmp")) {
      return std::nullopt;
    }
    auto a = position(c.inputs[0], lq, lk), b = position(c.inputs[1], lq, lk);
    if (!a || !b || *a == *b) return std::nullopt;
    std::string cmp = *c.text_attr("cmp");
    if (*a == 1) {  // query <cmp> key: flip to key <cmp'> query
      static const std::map<std::string, std::string> kFlip = {
          {"lt", "gt"}, {"gt", "lt"}, {"le", "ge"}, {"ge", "le"}, {"eq", "eq"}, {"ne", "ne"}};
      cmp = kFlip.at(cmp);
    }
    if (cmp == "gt") return true;
    if (cmp == "le") return false;
    return std::nullopt;
  }
  // c x compare for a causal compare (its polarity and c).
  std::optional<std::pair<bool, double>> scaled_compare(int32_t id, int64_t lq, int64_t lk) const {
    const Node& n = node(id);
    auto f = factor_of(n);
    if (!f) return std::nullopt;
    auto future = causal_compare(n.inputs[0], lq, lk);
    if (!future) return std::nullopt;
    return std::make_pair(*future, *f);
  }
  // A constant fill: affine(iota or compare, 0, c).
  std::optional<double> constant(int32_t id) const {
    const Node& n = node(id);
    if (n.op != OpKind::affine || !n.real_attr("value") || *n.real_attr("value") != 0) {
      return std::nullopt;
    }
    const Node& x = node(n.inputs[0]);
    if (x.op != OpKind::iota && x.op != OpKind::compare) return std::nullopt;
    return n.real_attr("offset") ? *n.real_attr("offset") : 0.0;
  }
  void mask_nodes(int32_t id, AttentionMatch& m) const {
    m.views.push_back(id);
    for (int32_t in : node(id).inputs) {
      const Node& x = node(in);
      if (x.op == OpKind::iota || x.op == OpKind::compare || factor_of(x) ||
          x.op == OpKind::affine) {
        mask_nodes(in, m);
      }
    }
  }

  // The mask of `n` (an add or select on the scores `s`).
  bool mask(const Node& n, int32_t s, AttentionMatch& m, std::optional<double>& masked) const {
    const auto& sd = n.type.dims;
    if (sd.size() < 2 || sd[sd.size() - 2].size != m.lq) return false;
    if (n.op == OpKind::add) {
      const int32_t other = n.inputs[0] == s ? n.inputs[1] : n.inputs[0];
      if (auto sc = scaled_compare(other, m.lq, m.lk); sc && sc->first) {
        m.causal = true;
        masked = sc->second;
        mask_nodes(other, m);
        return true;
      }
      // A dense bias, the same for every sequence and head.
      const TensorType& t = node(other).type;
      const size_t r = t.dims.size();
      if (r < 2 || !isa::is_float(t.dtype) || t.dims[r - 1].size != m.lk ||
          t.dims[r - 2].size != m.lq) {
        return false;
      }
      for (size_t i = 0; i + 2 < r; ++i) {
        if (t.dims[i].size != 1) return false;
      }
      m.bias = other;
      m.bias_reshape = r != 2;
      return true;
    }
    // select(keep, s, fill) or select(masked, fill, s).
    if (n.inputs[0] == s || (n.inputs[1] == s) == (n.inputs[2] == s)) return false;
    const bool s_on_true = n.inputs[1] == s;
    const int32_t fill = s_on_true ? n.inputs[2] : n.inputs[1];
    auto future = causal_compare(n.inputs[0], m.lq, m.lk);
    if (!future || *future == s_on_true) return false;
    std::optional<double> c = constant(fill);
    if (!c) {  // c x the opposite compare: c wherever the select takes it
      auto sc = scaled_compare(fill, m.lq, m.lk);
      if (sc && sc->first == *future) c = sc->second;
    }
    if (!c) return false;
    m.causal = true;
    masked = *c;
    mask_nodes(n.inputs[0], m);
    mask_nodes(fill, m);
    return true;
  }

  const Graph& m_g;
  const GraphUses& m_uses;
  std::set<int32_t> m_in_group;
};

}  // namespace

std::vector<AttentionMatch> find_attention(const Graph& g, const std::vector<int32_t>& group,
                                           const GraphUses& uses) {
  std::vector<AttentionMatch> out;
  std::optional<Matcher> matcher;
  std::set<int32_t> taken;
  for (int32_t id : group) {
    const Node* n = g.find(id);
    if (!n || n->op != OpKind::batch_matmul || taken.count(id)) continue;
    if (!matcher) matcher.emplace(g, group, uses);
    auto m = matcher->match(*n);
    if (!m) continue;
    taken.insert(m->core.begin(), m->core.end());
    out.push_back(std::move(*m));
  }
  return out;
}

bool apply_attention(GroupGraph& r, const std::vector<AttentionMatch>& matches,
                     const GraphUses& uses) {
  Graph& g = r.graph;
  std::set<int32_t> removed, kept, reused;  // reused: ids of replaced nodes given to new ones
  std::map<int32_t, std::vector<int32_t>> before;  // nodes placed just before a node
  for (const AttentionMatch& m : matches) {
    std::vector<int32_t> spare(m.core.rbegin(), m.core.rend());  // ids of replaced nodes
    removed.insert(m.core.begin(), m.core.end());
    kept.insert({m.q, m.k, m.v, m.bias});
    int32_t bias = m.bias;
    if (m.bias_reshape) {
      bias = spare.back();
      spare.pop_back();
      Node& b = *g.find(bias);
      const Node& src = *g.find(m.bias);
      b = Node{};
      b.id = bias;
      b.op = OpKind::reshape;
      b.inputs = {m.bias};
      b.attrs["shape"] = std::vector<int64_t>{m.lq, m.lk};
      b.type = {src.type.dtype, {Dim::of(m.lq), Dim::of(m.lk)}};
      before[m.out].push_back(bias);
      reused.insert(bias);
    }
    Node& out = *g.find(m.out);
    Node attn;
    attn.id = m.out_reshape ? spare.back() : m.out;
    attn.op = OpKind::attention;
    attn.name = !m.out_reshape     ? out.name
                : out.name.empty() ? "attention"
                                   : out.name + ".attention";
    if (!m.out_reshape) attn.output_name = out.output_name;
    attn.inputs = {m.q, m.k, m.v};
    if (bias >= 0) attn.inputs.push_back(bias);
    attn.attrs["heads"] = m.heads;
    attn.attrs["scale"] = m.scale;
    if (m.causal) attn.attrs["causal"] = int64_t{1};
    if (m.seq) attn.attrs["seq"] = m.seq;
    try {
      attn.type = infer_node(g, attn);
    } catch (const base::InputError&) {
      return false;
    }
    if (m.out_reshape) {
      reused.insert(attn.id);
      before[m.out].push_back(attn.id);
      *g.find(attn.id) = attn;
      Node reshape;
      reshape.id = out.id;
      reshape.name = out.name;
      reshape.output_name = out.output_name;
      reshape.op = OpKind::reshape;
      reshape.inputs = {attn.id};
      std::vector<int64_t> shape;
      for (const Dim& d : out.type.dims) shape.push_back(d.size);
      reshape.attrs["shape"] = shape;
      reshape.type = out.type;
      out = reshape;
    } else {
      if (!(attn.type == out.type)) return false;
      out = attn;
    }
  }
  // Head views and mask nodes read by nothing that stays, latest first.
  std::vector<int32_t> views;
  for (const AttentionMatch& m : matches) views.insert(views.end(), m.views.begin(), m.views.end());
  std::map<int32_t, size_t> position;
  for (size_t i = 0; i < r.group.size(); ++i) position[r.group[i]] = i;
  std::sort(views.begin(), views.end(), [&](int32_t a, int32_t b) {
    return position.count(a) && position.count(b) ? position[a] > position[b] : a > b;
  });
  views.erase(std::unique(views.begin(), views.end()), views.end());
  for (int32_t id : views) {
    if (!position.count(id) || kept.count(id) || removed.count(id) || uses.is_output(id)) continue;
    const auto& rs = uses.consumers(id);
    if (std::all_of(rs.begin(), rs.end(), [&](int32_t c) { return removed.count(c) != 0; })) {
      removed.insert(id);
    }
  }
  std::vector<int32_t> order;
  for (int32_t id : r.group) {
    if (removed.count(id)) continue;
    if (auto it = before.find(id); it != before.end()) {
      order.insert(order.end(), it->second.begin(), it->second.end());
    }
    order.push_back(id);
  }
  r.group = order;
  g.nodes.erase(std::remove_if(g.nodes.begin(), g.nodes.end(),
                               [&](const Node& n) {
                                 return removed.count(n.id) != 0 && reused.count(n.id) == 0;
                               }),
                g.nodes.end());
  return true;
}

}  // namespace wallsim::compiler_stub
