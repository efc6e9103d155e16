// dynamic_split: an op with a dynamic dimension (bounded by a run-time scalar, or unknown) or
// that reads a run-time scalar sits in a group of its own, so the static ops around it form
// groups whose signatures do not depend on it.
#include "wallsim/runtime/materialize.h"

namespace wallsim::runtime {
namespace {

bool is_dynamic(const compiler_stub::Node& n) {
  if (n.text_attr("scalar")) return true;
  for (const auto& d : n.type.dims) {
    if (d.kind != compiler_stub::Dim::Kind::fixed) return true;
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
