// Weight layouts: which permutation a weight is stored in, from the ops that read it.
#include "wallsim/compiler_stub/weight_layouts.h"

namespace wallsim::compiler_stub {

WeightLayout choose_weight_layout(const TensorType& type,
                                  const std::vector<const Node*>& consumers) {
  const std::vector<int64_t>* perm = nullptr;
  for (const Node* n : consumers) {
    if (n->op != OpKind::transpose || n->inputs.size() != 1) return {};
    const std::vector<int64_t>* p = n->ints_attr("perm");
    if (p == nullptr || p->size() != type.dims.size()) return {};
    if (perm != nullptr && *perm != *p) return {};
    perm = p;
  }
  if (perm == nullptr) return {};
  bool identity = true;
  for (size_t i = 0; i < perm->size(); ++i) identity = identity && (*perm)[i] == int64_t(i);
  if (identity) return {};
  return {*perm};
}

TensorType stored_type(const TensorType& logical, const WeightLayout& layout) {
  if (layout.as_given()) return logical;
  TensorType t = logical;
  for (size_t i = 0; i < layout.perm.size(); ++i) t.dims[i] = logical.dims[layout.perm[i]];
  return t;
}

HostTensor lay_out(const HostTensor& logical, isa::DType dtype, const WeightLayout& layout) {
  if (layout.as_given()) return logical;
  // The reference evaluator's transpose, so the stored values are what the transpose it
  // replaces would have produced.
  Graph g;
  Node in;
  in.id = 0;
  in.name = "weight";
  in.type.dtype = dtype;
  for (int64_t d : logical.shape) in.type.dims.push_back(Dim::of(d));
  Node t;
  t.id = 1;
  t.op = OpKind::transpose;
  t.inputs = {0};
  t.attrs["perm"] = layout.perm;
  g.nodes = {in, t};
  g.outputs = {1};
  return evaluate(g, {{"weight", logical}}, {}).at(1);
}

std::vector<int64_t> inverse(const WeightLayout& layout) {
  std::vector<int64_t> inv(layout.perm.size());
  for (size_t i = 0; i < layout.perm.size(); ++i) inv[layout.perm[i]] = static_cast<int64_t>(i);
  return inv;
}

}  // namespace wallsim::compiler_stub
