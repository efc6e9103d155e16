// reexecute: re-executing versus materialising a value read by several ops. Materialising
// writes the value to HBM and reads it back (2 x its bytes); re-executing it where it is read
// costs reading its inputs again. A fanout cut is withdrawn when re-executing is no dearer —
// the value has no multiply-accumulates (views, element-wise ops, iota, norms) and its inputs
// hold at most twice its bytes — so the value stays fused with its readers.
#include "wallsim/runtime/materialize.h"

namespace wallsim::runtime {
namespace {

using compiler_stub::OpKind;

int64_t bytes_of(const compiler_stub::TensorType& t) {
  const int64_t e = t.elements();
  return e < 0 ? 0 : e * isa::dtype_bytes(t.dtype);
}

bool has_macs(OpKind op) {
  return op == OpKind::matmul || op == OpKind::batch_matmul || op == OpKind::decode_attention;
}

class Reexecute final : public MaterializationPolicy {
 public:
  void apply(const OpStream& s, CutPlan& plan) const override {
    for (size_t i = 0; i < plan.boundaries(); ++i) {
      if (!plan.asked_by(i, Heuristic::fanout)) continue;
      const compiler_stub::Node& n = s.node(i);
      if (has_macs(n.op)) continue;
      int64_t in_bytes = 0;
      for (int32_t in : n.inputs) in_bytes += bytes_of(s.pending.find(in)->type);
      if (in_bytes <= 2 * bytes_of(n.type)) plan.withdraw(i, Heuristic::fanout);
    }
  }
};

}  // namespace

const MaterializationPolicy& reexecute_policy() {
  static const Reexecute kPolicy;
  return kPolicy;
}

}  // namespace wallsim::runtime
