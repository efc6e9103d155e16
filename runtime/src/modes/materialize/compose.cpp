// The heuristic registry, CutPlan, and the composition of a set of heuristics into one plan.
#include <algorithm>

#include "wallsim/runtime/materialize.h"

namespace wallsim::runtime {
namespace {

using Phase = MaterializationPolicy::Phase;

struct Entry {
  std::string_view name;
  Phase phase;
  std::string_view summary;
};
constexpr Entry kEntries[] = {
#define WALLSIM_HEURISTIC(id, phase, summary) {#id, Phase::phase, summary},
#include "wallsim/runtime/heuristics.def"
};

uint32_t bit(Heuristic h) { return 1u << static_cast<unsigned>(h); }

}  // namespace

#define WALLSIM_HEURISTIC(id, phase, summary) const MaterializationPolicy& id##_policy();
#include "wallsim/runtime/heuristics.def"

std::string_view name_of(Heuristic h) { return kEntries[static_cast<int>(h)].name; }
std::string_view summary_of(Heuristic h) { return kEntries[static_cast<int>(h)].summary; }

std::vector<Heuristic> default_heuristics() {
  std::vector<Heuristic> all;
  for (int i = 0; i < kNumHeuristics; ++i) all.push_back(static_cast<Heuristic>(i));
  return all;
}

const MaterializationPolicy& policy_for(Heuristic h) {
  switch (h) {
#define WALLSIM_HEURISTIC(id, phase, summary) \
  case Heuristic::id:                         \
    return id##_policy();
#include "wallsim/runtime/heuristics.def"
  }
  return size_policy();
}

void CutPlan::cut_after(size_t i, Heuristic by) {
  if (i < m_reasons.size()) m_reasons[i] |= bit(by);
}

void CutPlan::cut_around(size_t i, Heuristic by) {
  if (i > 0) cut_after(i - 1, by);
  cut_after(i, by);
}

void CutPlan::withdraw(size_t i, Heuristic by) {
  if (i < m_reasons.size()) m_reasons[i] &= ~bit(by);
}

bool CutPlan::asked_by(size_t i, Heuristic by) const {
  return i < m_reasons.size() && (m_reasons[i] & bit(by)) != 0;
}

std::vector<size_t> CutPlan::cuts() const {
  std::vector<size_t> out;
  for (size_t i = 0; i < m_reasons.size(); ++i) {
    if (m_reasons[i]) out.push_back(i);
  }
  return out;
}

std::vector<std::vector<int32_t>> CutPlan::groups(const std::vector<int32_t>& ops) const {
  std::vector<std::vector<int32_t>> out;
  std::vector<int32_t> group;
  for (size_t i = 0; i < ops.size(); ++i) {
    group.push_back(ops[i]);
    if (i + 1 == ops.size() || is_cut(i)) {
      out.push_back(std::move(group));
      group.clear();
    }
  }
  return out;
}

CutPlan plan_cuts(const OpStream& s, const std::vector<Heuristic>& set) {
  CutPlan plan(s.size());
  for (Phase phase : {Phase::propose, Phase::veto, Phase::limit}) {
    for (int i = 0; i < kNumHeuristics; ++i) {
      const auto h = static_cast<Heuristic>(i);
      if (kEntries[i].phase != phase || std::find(set.begin(), set.end(), h) == set.end()) continue;
      policy_for(h).apply(s, plan);
    }
  }
  return plan;
}

}  // namespace wallsim::runtime
