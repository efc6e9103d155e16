// Materialization heuristics of the fused (lazy) mode: where a flush's op stream is cut into
// fusion groups. Each heuristic is one policy behind MaterializationPolicy, in its own file
// under runtime/src/modes/materialize/, listed once in heuristics.def; runtime.lazy.heuristics
// selects the set.
#pragma once

#include <cstdint>
#include <set>
#include <string_view>
#include <vector>

#include "wallsim/base/enum_traits.h"
#include "wallsim/compiler_stub/graph.h"

namespace wallsim::runtime {

struct LazyConfig;

enum class Heuristic : uint8_t {
#define WALLSIM_HEURISTIC(id, phase, summary) id,
#include "wallsim/runtime/heuristics.def"
};
inline constexpr int kNumHeuristics = 0
#define WALLSIM_HEURISTIC(id, phase, summary) +1
#include "wallsim/runtime/heuristics.def"
    ;
std::string_view name_of(Heuristic h);
std::string_view summary_of(Heuristic h);
// The set a fused run uses unless runtime.lazy.heuristics says otherwise: TorchTPU's
// (torch_tpu/eager/): every heuristic.
std::vector<Heuristic> default_heuristics();

// One flush as the policies see it: the pending-graph ids of its ops in program order, the
// pending graph that holds them, and the pending ids after which the workload marked a split.
struct OpStream {
  const std::vector<int32_t>& ops;
  const compiler_stub::Graph& pending;
  const LazyConfig& lazy;
  const std::set<int32_t>& marked;
  const compiler_stub::Node& node(size_t i) const { return *pending.find(ops[i]); }
  size_t size() const { return ops.size(); }
};

// Cut points over a stream of n ops: boundary b (0 <= b < n - 1) lies after op b. A boundary
// remembers which heuristics asked for it; it is a cut while at least one still does.
class CutPlan {
 public:
  explicit CutPlan(size_t n) : m_reasons(n > 0 ? n - 1 : 0, 0) {}
  size_t boundaries() const { return m_reasons.size(); }
  // After op i (the end of the stream is no boundary and is ignored).
  void cut_after(size_t i, Heuristic by);
  // Before and after op i: the op sits alone.
  void cut_around(size_t i, Heuristic by);
  // `by` no longer asks for boundary i.
  void withdraw(size_t i, Heuristic by);
  bool asked_by(size_t i, Heuristic by) const;
  bool is_cut(size_t i) const { return m_reasons[i] != 0; }
  // The boundaries that are cuts, ascending.
  std::vector<size_t> cuts() const;
  // The stream's ops split at the cuts.
  std::vector<std::vector<int32_t>> groups(const std::vector<int32_t>& ops) const;

 private:
  std::vector<uint32_t> m_reasons;  // bit h: heuristic h asks for this boundary
};

// A heuristic. Stateless and shared; it reads the stream and adds cuts to the plan (propose),
// withdraws cuts other heuristics asked for (veto), or splits what is left (limit). Phases run
// in that order; within a phase, in heuristics.def order, whatever the order of the set.
class MaterializationPolicy {
 public:
  enum class Phase : uint8_t { propose, veto, limit };
  virtual ~MaterializationPolicy() = default;
  virtual void apply(const OpStream& s, CutPlan& plan) const = 0;
};
const MaterializationPolicy& policy_for(Heuristic h);

// The cut plan of a stream under a set of heuristics.
CutPlan plan_cuts(const OpStream& s, const std::vector<Heuristic>& set);

}  // namespace wallsim::runtime

namespace wallsim::base {
template <>
struct EnumTraits<runtime::Heuristic> {
  static constexpr int kCount = runtime::kNumHeuristics;
};
}  // namespace wallsim::base
