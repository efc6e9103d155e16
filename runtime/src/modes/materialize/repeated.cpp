// repeated: the stream is cut at the ends of a repeated subsequence of op names (attributes and
// shapes ignored), so repeated layers become groups with one signature and share one cache
// entry. The period is searched from lazy.repeat_min_ops to lazy.repeat_max_ops; the period
// covering most ops wins (ties: the shorter period, then the earlier start), and the parts
// before and after the repeats are searched again.
#include <tuple>
#include <utility>
#include <vector>

#include "wallsim/runtime/config.h"
#include "wallsim/runtime/materialize.h"

namespace wallsim::runtime {
namespace {

struct Repeat {
  size_t start = 0, period = 0, count = 0;
  size_t covered() const { return period * count; }
};

// The best repeat within names[lo, hi), or count 0.
Repeat best_repeat(const std::vector<int>& names, size_t lo, size_t hi, size_t min_p,
                   size_t max_p) {
  Repeat best;
  for (size_t p = min_p; p <= max_p && 2 * p <= hi - lo; ++p) {
    size_t j = lo;
    while (j + p < hi) {
      if (names[j] != names[j + p]) {
        ++j;
        continue;
      }
      const size_t a = j;
      while (j + p < hi && names[j] == names[j + p]) ++j;
      const Repeat r{a, p, (j - a + p) / p};
      if (r.count >= 2 && r.covered() > best.covered()) best = r;
    }
  }
  return best;
}

class Repeated final : public MaterializationPolicy {
 public:
  void apply(const OpStream& s, CutPlan& plan) const override {
    const auto min_p = static_cast<size_t>(s.lazy.repeat_min_ops);
    const auto max_p = static_cast<size_t>(s.lazy.repeat_max_ops);
    std::vector<int> names;
    for (size_t i = 0; i < s.size(); ++i) names.push_back(static_cast<int>(s.node(i).op));
    std::vector<std::pair<size_t, size_t>> todo = {{0, s.size()}};
    while (!todo.empty()) {
      const auto [lo, hi] = todo.back();
      todo.pop_back();
      if (hi - lo < 2 * min_p) continue;
      const Repeat r = best_repeat(names, lo, hi, min_p, max_p);
      if (r.count < 2) continue;
      if (r.start > 0) plan.cut_after(r.start - 1, Heuristic::repeated);
      for (size_t k = 1; k <= r.count; ++k)
        plan.cut_after(r.start + k * r.period - 1, Heuristic::repeated);
      todo.emplace_back(lo, r.start);
      todo.emplace_back(r.start + r.covered(), hi);
    }
  }
};

}  // namespace

const MaterializationPolicy& repeated_policy() {
  static const Repeated kPolicy;
  return kPolicy;
}

}  // namespace wallsim::runtime
