// marked_split: the workload marked a split point (Session::mark_split) after an op; the
// stream is cut there.
#include "wallsim/runtime/materialize.h"

namespace wallsim::runtime {
namespace {

class MarkedSplit final : public MaterializationPolicy {
 public:
  void apply(const OpStream& s, CutPlan& plan) const override {
    for (size_t i = 0; i < s.size(); ++i) {
      if (s.marked.count(s.ops[i])) plan.cut_after(i, Heuristic::marked_split);
    }
  }
};

}  // namespace

const MaterializationPolicy& marked_split_policy() {
  static const MarkedSplit kPolicy;
  return kPolicy;
}

}  // namespace wallsim::runtime
