// size: after every other heuristic, a group closes once it holds runtime.lazy.max_group_ops
// ops (0: no limit).
#include "wallsim/runtime/config.h"
#include "wallsim/runtime/materialize.h"

namespace wallsim::runtime {
namespace {

class SizeLimit final : public MaterializationPolicy {
 public:
  void apply(const OpStream& s, CutPlan& plan) const override {
    const int64_t max = s.lazy.max_group_ops;
    if (max <= 0) return;
    int64_t in_group = 0;
    for (size_t i = 0; i < plan.boundaries(); ++i) {
      ++in_group;
      if (plan.is_cut(i)) {
        in_group = 0;
      } else if (in_group >= max) {
        plan.cut_after(i, Heuristic::size);
        in_group = 0;
      }
    }
  }
};

}  // namespace

const MaterializationPolicy& size_policy() {
  static const SizeLimit kPolicy;
  return kPolicy;
}

}  // namespace wallsim::runtime
