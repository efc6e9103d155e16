// Partitioning and the group-by-group compile driver.
#include "wallsim/compiler_stub/compile.h"

#include <chrono>
#include <unordered_map>
#include <unordered_set>

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

// What a group must hold in HBM whatever the lowering does: the graph inputs it reads and the
// graph outputs it writes (at their bounds; unknown sizes count 0). Checked before lowering,
// which takes long and much memory on a graph far over capacity.
int64_t hbm_lower_bound(const Graph& g, const std::vector<int32_t>& group) {
  std::unordered_map<int32_t, const Node*> by_id;
  for (const Node& n : g.nodes) by_id[n.id] = &n;
  std::unordered_set<int32_t> counted;
  int64_t bytes = 0;
  auto add = [&](int32_t id) {
    auto it = by_id.find(id);
    if (it == by_id.end() || !counted.insert(id).second) return;
    const int64_t e = it->second->type.elements();
    const int64_t b = e > 0 ? e * isa::dtype_bytes(it->second->type.dtype) : 0;
    bytes = b > INT64_MAX - bytes ? INT64_MAX : bytes + b;
  };
  std::unordered_set<int32_t> in_group(group.begin(), group.end());
  for (int32_t id : group) {
    auto it = by_id.find(id);
    if (it == by_id.end()) continue;
    for (int32_t x : it->second->inputs) {
      auto in = by_id.find(x);
      if (in != by_id.end() && in->second->op == OpKind::input) add(x);
    }
  }
  for (int32_t id : g.outputs) {
    if (in_group.count(id)) add(id);
  }
  return bytes;
}

CompileError over_hbm(int64_t need, const isa::ArchSpec& arch, const char* what) {
  return CompileError{-1, "",
                      std::string(what) + " need " + std::to_string(need) +
                          " bytes but the core has " + std::to_string(arch.hbm.bytes)};
}

}  // namespace

std::variant<CompiledGraph, CompileError> compile_graph(
    const Graph& g, const isa::ArchSpec& arch, GroupPolicy policy,
    const std::vector<std::vector<int32_t>>& groups, const LoweringOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  CompiledGraph out;
  const auto parts = partition(g, policy, groups);
  const GraphUses uses(g);
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string name = g.name + (parts.size() > 1 ? "_g" + std::to_string(i) : "");
    if (const int64_t need = hbm_lower_bound(g, parts[i]); need > arch.hbm.bytes) {
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
