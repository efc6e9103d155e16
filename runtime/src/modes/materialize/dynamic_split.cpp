// dynamic_split: an op with a dynamic dimension — unknown, with no bound, so data-dependent —
// sits in a group of its own: the static ops around it form groups that compile, and only the
// op itself meets the static compiler's refusal (and the fallback). A bounded dimension (at
// most `size`, the real extent a run-time scalar) is not dynamic here: it compiles once at its
// bound, which is the point of bounded dynamism.
#include "wallsim/runtime/materialize.h"

namespace wallsim::runtime {
namespace {

bool is_dynamic(const compiler_stub::Node& n) {
  for (const auto& d : n.type.dims) {
    if (d.kind == compiler_stub::Dim::Kind::unknown) return true;
  }
  return false;
}

class DynamicSplit final : public MaterializationPolicy {
 public:
  void apply(const OpStream& s, CutPlan& plan) const override {
    for (size_t i = 0; i < s.size(); ++i) {
      if (is_dynamic(s.node(i))) plan.cut_around(i, Heuristic::dynamic_split);
    }
  }
};

}  // namespace

const MaterializationPolicy& dynamic_split_policy() {
  static const DynamicSplit kPolicy;
  return kPolicy;
}

}  // namespace wallsim::runtime
