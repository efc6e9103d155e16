// collective_split: a collective sits in a group of its own, so the compute before it is one
// plan and the compute after it another (issue 38; without it the collective stays inside).
// A send or recv is cut the same way.
#include "wallsim/runtime/materialize.h"

namespace wallsim::runtime {
namespace {

class CollectiveSplit final : public MaterializationPolicy {
 public:
  void apply(const OpStream& s, CutPlan& plan) const override {
    for (size_t i = 0; i < s.size(); ++i) {
      const compiler_stub::OpKind op = s.node(i).op;
      if (op == compiler_stub::OpKind::all_reduce || op == compiler_stub::OpKind::all_gather ||
          op == compiler_stub::OpKind::reduce_scatter || op == compiler_stub::OpKind::send ||
          op == compiler_stub::OpKind::recv)
        plan.cut_around(i, Heuristic::collective_split);
    }
  }
};

}  // namespace

const MaterializationPolicy& collective_split_policy() {
  static const CollectiveSplit kPolicy;
  return kPolicy;
}

}  // namespace wallsim::runtime
