// Partitioning and the group-by-group compile driver.
#include "wallsim/compiler_stub/compile.h"

#include <chrono>
#include <map>

#include "wallsim/compiler_stub/composites.h"
#include "wallsim/compiler_stub/estimate.h"
#include "wallsim/isa/verifier.h"

namespace wallsim::compiler_stub {

std::vector<std::vector<int32_t>> partition(
    const Graph& g, GroupPolicy policy, const std::vector<std::vector<int32_t>>& explicit_groups) {
  std::vector<std::vector<int32_t>> groups;
  switch (policy) {
    case GroupPolicy::whole:
      groups.emplace_back();
      for (const Node& n : g.nodes) {
        if (n.op != OpKind::input) groups.back().push_back(n.id);
      }
      if (groups.back().empty()) groups.clear();
      break;
    case GroupPolicy::per_op:
      for (const Node& n : g.nodes) {
        if (n.op != OpKind::input) groups.push_back({n.id});
      }
      break;
    case GroupPolicy::explicit_groups:
      groups = explicit_groups;
      break;
  }
  return groups;
}

namespace {

CompileError over_hbm(int64_t need, const isa::ArchSpec& arch, const char* what) {
  return CompileError{-1, "",
                      std::string(what) + " need " + std::to_string(need) +
                          " bytes but the core has " + std::to_string(arch.hbm.bytes)};
}

}  // namespace

std::variant<CompiledGraph, CompileError> compile_graph(
    const Graph& graph, const isa::ArchSpec& arch, GroupPolicy policy,
    const std::vector<std::vector<int32_t>>& groups, const LoweringOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  // Composites are lowered as their expansion; an explicit group names a composite by its id,
  // which stands for every node of its expansion.
  std::vector<std::pair<int32_t, std::vector<int32_t>>> expanded;
  Graph expansion;
  if (has_composites(graph)) expansion = expand_composites(graph, &expanded);
  const Graph& g = expanded.empty() ? graph : expansion;
  std::vector<std::vector<int32_t>> explicit_groups = groups;
  if (!expanded.empty()) {
    const std::map<int32_t, std::vector<int32_t>> of(expanded.begin(), expanded.end());
    for (auto& group : explicit_groups) {
      std::vector<int32_t> ids;
      for (int32_t id : group) {
        auto it = of.find(id);
        if (it == of.end()) {
          ids.push_back(id);
        } else {
          ids.insert(ids.end(), it->second.begin(), it->second.end());
        }
      }
      group = std::move(ids);
    }
  }
  CompiledGraph out;
  const auto parts = partition(g, policy, explicit_groups);
  const GraphUses uses(g);
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string name = g.name + (parts.size() > 1 ? "_g" + std::to_string(i) : "");
    if (const int64_t need = min_hbm_bytes(g, parts[i]); need > arch.hbm.bytes) {
      return over_hbm(need, arch, "the group's HBM inputs and outputs");
    }
    auto lowered = lower_group(g, parts[i], arch, name, options, &uses);
    if (auto* err = std::get_if<CompileError>(&lowered)) return *err;
    Lowered& l = std::get<Lowered>(lowered);
    // Off-chip capacity is a limit of the group, not a bug: every tensor the plan keeps in HBM
    // (inputs, outputs, spilled scratch; a dead value's scratch is reused by later ones, so
    // scratch is bounded by the largest live set) must fit the core at once.
    const int64_t hbm = l.plan.hbm_bytes();
    if (hbm > arch.hbm.bytes) {
      return over_hbm(hbm, arch, "the plan's HBM tensors (inputs, outputs, spilled scratch)");
    }
    auto diags = isa::verify(l.plan, arch);
    if (!diags.empty()) {
      return CompileError{-1, "",
                          "compiler bug: the plan fails the verifier: " + diags[0].to_string()};
    }
    out.plans.plans.push_back(std::move(l.plan));
    l.stats.nodes = static_cast<int64_t>(parts[i].size());
    out.groups.push_back(l.stats);
  }
  out.compile_wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace wallsim::compiler_stub
