// fanout: a value read by two or more ops of the flush is materialised, so that no consumer's
// group recomputes it: the stream is cut after its producer.
#include <map>

#include "wallsim/runtime/materialize.h"

namespace wallsim::runtime {
namespace {

class Fanout final : public MaterializationPolicy {
 public:
  void apply(const OpStream& s, CutPlan& plan) const override {
    std::map<int32_t, int> readers;  // pending id -> ops of the flush that read it
    for (size_t i = 0; i < s.size(); ++i) {
      for (int32_t in : s.node(i).inputs) readers[in]++;
    }
    for (size_t i = 0; i < s.size(); ++i) {
      auto it = readers.find(s.ops[i]);
      if (it != readers.end() && it->second >= 2) plan.cut_after(i, Heuristic::fanout);
    }
  }
};

}  // namespace

const MaterializationPolicy& fanout_policy() {
  static const Fanout kPolicy;
  return kPolicy;
}

}  // namespace wallsim::runtime
