// not_fusible: an op listed in runtime.lazy.not_fusible sits in a group of its own.
#include <algorithm>

#include "wallsim/runtime/config.h"
#include "wallsim/runtime/materialize.h"

namespace wallsim::runtime {
namespace {

class NotFusible final : public MaterializationPolicy {
 public:
  void apply(const OpStream& s, CutPlan& plan) const override {
    const auto& alone = s.lazy.not_fusible;
    for (size_t i = 0; i < s.size(); ++i) {
      if (std::find(alone.begin(), alone.end(), s.node(i).op) != alone.end())
        plan.cut_around(i, Heuristic::not_fusible);
    }
  }
};

}  // namespace

const MaterializationPolicy& not_fusible_policy() {
  static const NotFusible kPolicy;
  return kPolicy;
}

}  // namespace wallsim::runtime
