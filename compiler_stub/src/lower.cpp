// The lowering pass: a group of graph nodes to one plan. For each node in order it runs the
// node's lowering from the op-family table (in row windows when the op is too large for
// SBUF), stores values needed after the group, and frees what is dead. The machinery is in
// lowering/lowering_context.h; the ops are in lowering/lower_<family>.cpp.
#include "wallsim/compiler_stub/lower.h"

#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub {

std::string CompileError::message() const {
  std::string where = node >= 0 ? "node " + std::to_string(node) + " (" + op + ")" : "group";
  return where + ": " + reason;
}

std::string value_name(const Graph& g, int32_t id) {
  const Node* n = g.find(id);
  if (n && n->op == OpKind::input && !n->name.empty()) return n->name;
  // An in-place write (a KV append or copy) updates its cache: the result is the cache's tensor.
  if (n && info(n->op).result == OpResult::in_place && !n->inputs.empty()) {
    return value_name(g, n->inputs[0]);
  }
  return "v" + std::to_string(id);
}

GraphUses::GraphUses(const Graph& g) : m_outputs(g.outputs.begin(), g.outputs.end()) {
  for (const Node& n : g.nodes) {
    for (int32_t in : n.inputs) m_consumers[in].push_back(n.id);
  }
}

const std::vector<int32_t>& GraphUses::consumers(int32_t id) const {
  static const std::vector<int32_t> kNone;
  auto it = m_consumers.find(id);
  return it == m_consumers.end() ? kNone : it->second;
}

namespace lowering {

const LoweringTable& lowering_table() {
  static const LoweringTable table = [] {
    LoweringTable t;
    t.add(OpKind::input, [](LoweringContext&, const Node&) -> LowerResult {
      return std::nullopt;  // loaded when first used
    });
    populate_matmul_lowerings(t);
    populate_elementwise_lowerings(t);
    populate_layout_lowerings(t);
    populate_indirect_lowerings(t);
    populate_attention_lowerings(t);
    populate_conv_lowerings(t);
    populate_activation_lowerings(t);
    populate_fused_attention_lowerings(t);
    return t;
  }();
  return table;
}

namespace {

std::variant<Lowered, CompileError> run_lowering(const Graph& g, const std::vector<int32_t>& group,
                                                 const isa::ArchSpec& arch,
                                                 const LoweringOptions& options,
                                                 const GraphUses& uses,
                                                 const std::string& plan_name) {
  for (int32_t id : group) {
    const Node* n = g.find(id);
    if (!n) return CompileError{id, "?", "not in the graph"};
    for (const Dim& d : n->type.dims) {
      if (d.kind == Dim::Kind::unknown) {
        return CompileError{id, std::string(info(n->op).name),
                            "an unknown dimension cannot be compiled statically"};
      }
    }
  }
  LoweringContext ctx(g, group, uses, arch, options, plan_name);
  ctx.index_uses(group);
  const LoweringTable& table = lowering_table();
  for (size_t i = 0; i < group.size(); ++i) {
    const Node& n = *g.find(group[i]);
    ctx.begin_node(n, static_cast<int>(i));
    const LowerFn* lower = table.find(n.op);
    if (!lower) return ctx.error("not supported by the lowering yet");
    if (auto err = ctx.row_windowed(n) ? ctx.lower_in_windows(n, *lower) : (*lower)(ctx, n)) {
      return *err;
    }
    if (ctx.too_large()) return ctx.too_large_error();
    if (n.op != OpKind::input && ctx.needed_outside(n.id) && !ctx.stored_to_hbm(n.id) &&
        !ctx.store(n.id)) {
      return ctx.no_room();
    }
    ctx.release_dead(static_cast<int>(i));
  }
  Lowered out;
  out.stats = ctx.stats();
  out.plan = ctx.builder().build();
  out.stats.instructions = out.plan.instruction_count();
  return out;
}

}  // namespace
}  // namespace lowering

bool has_lowering(OpKind op) { return lowering::lowering_table().find(op) != nullptr; }

std::variant<Lowered, CompileError> lower_group(const Graph& g, const std::vector<int32_t>& group,
                                                const isa::ArchSpec& arch,
                                                const std::string& plan_name,
                                                const LoweringOptions& options,
                                                const GraphUses* uses) {
  if (uses) return lowering::run_lowering(g, group, arch, options, *uses, plan_name);
  return lowering::run_lowering(g, group, arch, options, GraphUses(g), plan_name);
}

}  // namespace wallsim::compiler_stub
