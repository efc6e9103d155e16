// Weight layouts: which permutation a weight is stored in, from the ops that read it.
#include "wallsim/compiler_stub/weight_layouts.h"

namespace wallsim::compiler_stub {

namespace {

// The one permutation every reader applies, when every reader is a transpose by it and it is
// not the identity; nullptr otherwise.
const std::vector<int64_t>* one_permutation(size_t rank, const std::vector<const Node*>& readers) {
  const std::vector<int64_t>* perm = nullptr;
  for (const Node* n : readers) {
    if (n->op != OpKind::transpose || n->inputs.size() != 1) return nullptr;
    const std::vector<int64_t>* p = n->ints_attr("perm");
    if (p == nullptr || p->size() != rank) return nullptr;
    if (perm != nullptr && *perm != *p) return nullptr;
    perm = p;
  }
  if (perm == nullptr) return nullptr;
  bool identity = true;
  for (size_t i = 0; i < perm->size(); ++i) identity = identity && (*perm)[i] == int64_t(i);
  return identity ? nullptr : perm;
}

// The one static shape every reader reshapes to, and every reshape's readers (each reshape's
// value read by ops only); nullptr when any reader is another op or the shapes differ.
const std::vector<int64_t>* one_reshape(const std::vector<const Node*>& readers,
                                        const ReadersOf& readers_of,
                                        std::vector<const Node*>& next) {
  const std::vector<int64_t>* shape = nullptr;
  for (const Node* n : readers) {
    if (n->op != OpKind::reshape || n->inputs.size() != 1) return nullptr;
    const std::vector<int64_t>* s = n->ints_attr("shape");
    if (s == nullptr || s->empty()) return nullptr;
    for (int64_t d : *s) {
      if (d < 0) return nullptr;
    }
    if (shape != nullptr && *shape != *s) return nullptr;
    shape = s;
    const std::vector<const Node*>* r = readers_of(n->id);
    if (r == nullptr) return nullptr;
    next.insert(next.end(), r->begin(), r->end());
  }
  return shape;
}

}  // namespace

WeightLayout choose_weight_layout(const TensorType& type, const std::vector<const Node*>& consumers,
                                  const ReadersOf& readers_of) {
  if (const auto* perm = one_permutation(type.dims.size(), consumers)) return {*perm, {}};
  if (!readers_of || consumers.empty()) return {};
  std::vector<const Node*> transposes;
  const std::vector<int64_t>* shape = one_reshape(consumers, readers_of, transposes);
  if (shape == nullptr) return {};
  if (const auto* perm = one_permutation(shape->size(), transposes)) return {*perm, *shape};
  return {};
}

TensorType reshaped_type(const TensorType& logical, const WeightLayout& layout) {
  if (layout.reshape.empty()) return logical;
  TensorType t = logical;
  t.dims.clear();
  for (int64_t d : layout.reshape) t.dims.push_back(Dim::of(d));
  return t;
}

TensorType stored_type(const TensorType& logical, const WeightLayout& layout) {
  if (layout.as_given()) return logical;
  const TensorType r = reshaped_type(logical, layout);
  TensorType t = r;
  for (size_t i = 0; i < layout.perm.size(); ++i) t.dims[i] = r.dims[layout.perm[i]];
  return t;
}

HostTensor lay_out(const HostTensor& logical, isa::DType dtype, const WeightLayout& layout) {
  if (layout.as_given()) return logical;
  // The reference evaluator's reshape and transpose, so the stored values are what the ops it
  // replaces would have produced.
  Graph g;
  Node in;
  in.id = 0;
  in.name = "weight";
  in.type.dtype = dtype;
  for (int64_t d : logical.shape) in.type.dims.push_back(Dim::of(d));
  g.nodes = {in};
  if (!layout.reshape.empty()) {
    Node r;
    r.id = 1;
    r.op = OpKind::reshape;
    r.inputs = {0};
    r.attrs["shape"] = layout.reshape;
    g.nodes.push_back(r);
  }
  Node t;
  t.id = static_cast<int32_t>(g.nodes.size());
  t.op = OpKind::transpose;
  t.inputs = {t.id - 1};
  t.attrs["perm"] = layout.perm;
  g.nodes.push_back(t);
  g.outputs = {t.id};
  return evaluate(g, {{"weight", logical}}, {}).at(t.id);
}

std::vector<int64_t> inverse(const WeightLayout& layout) {
  std::vector<int64_t> inv(layout.perm.size());
  for (size_t i = 0; i < layout.perm.size(); ++i) inv[layout.perm[i]] = static_cast<int64_t>(i);
  return inv;
}

}  // namespace wallsim::compiler_stub
