// The lowering pass: a group of graph nodes to one plan. For each node in order it runs the
// node's lowering from the op-family table (in row windows when the op is too large for
// SBUF), stores values needed after the group, and frees what is dead. The machinery is in
// lowering/lowering_context.h; the ops are in lowering/lower_<family>.cpp.
#include "wallsim/compiler_stub/lower.h"

#include <algorithm>
#include <map>
#include <set>

#include "group_rewrite.h"
#include "lowering/cache_write_order.h"
#include "lowering/lowering_context.h"
#include "wallsim/compiler_stub/schedule.h"

namespace wallsim::compiler_stub {

std::string CompileError::message() const {
  std::string where = node < 0 ? "group"
                      : name.empty()
                          ? "node " + std::to_string(node) + " (" + op + ")"
                          : "'" + name + "' (" + op + ", node " + std::to_string(node) + ")";
  return where + ": " + reason;
}

std::string value_name(const Graph& g, int32_t id) {
  const Node* n = g.find(id);
  if (n && n->op == OpKind::input && !n->name.empty()) return n->name;
  if (n && !n->output_name.empty()) return n->output_name;  // validation keeps it unique
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
    populate_collective_lowerings(t);
    return t;
  }();
  return table;
}

namespace {

// Matmul + bias fusion, a rewrite of the group's graph before lowering: a matmul whose only
// consumer is a bias_add of the same group (and which is not a graph output) is lowered with
// it as one op. The bias_add node becomes a matmul with the bias as a third input (its id,
// value and place in the group kept, so its consumers and its output are unchanged); the
// matmul node leaves the group. lower_matmul adds the bias as it evacuates PSUM: the matmul
// result never exists apart, and no separate pass over it is made. The bias row is then held
// whole, replicated on every partition, while the matmul runs: only a bias within the share of
// SBUF a matmul keeps an operand whole in (streamed_operand_percent) is fused; a wider one (a
// bias_add that would run in column windows) stays apart. Found by reading the graph: bias_add
// -> its matmul.
std::map<int32_t, int32_t> find_matmul_bias(const Graph& g, const std::vector<int32_t>& group,
                                            const GraphUses& uses, const isa::ArchSpec& arch,
                                            const LoweringOptions& options) {
  std::map<int32_t, int32_t> fused;
  std::set<int32_t> in_group;
  for (int32_t id : group) {
    const Node* ba = g.find(id);
    if (!ba || ba->op != OpKind::bias_add || ba->inputs.size() != 2) continue;
    if (in_group.empty()) in_group.insert(group.begin(), group.end());
    const Node* mm = g.find(ba->inputs[0]);
    if (!mm || mm->op != OpKind::matmul || mm->inputs.size() != 2 || !in_group.count(mm->id) ||
        ba->inputs[1] == mm->id || uses.is_output(mm->id) || uses.consumers(mm->id).size() != 1 ||
        mm->type.dtype != ba->type.dtype) {
      continue;
    }
    const Node* bias = g.find(ba->inputs[1]);
    if (!bias ||
        view_of(bias->type).rows * view_of(bias->type).cols * isa::dtype_bytes(bias->type.dtype) >
            arch.sbuf.bytes_per_partition * options.streamed_operand_percent / 100) {
      continue;
    }
    fused[id] = mm->id;
  }
  return fused;
}

// Removes `dropped` from a rewritten group and its graph.
void drop_nodes(GroupGraph& r, const std::set<int32_t>& dropped) {
  r.group.erase(std::remove_if(r.group.begin(), r.group.end(),
                               [&](int32_t id) { return dropped.count(id) != 0; }),
                r.group.end());
  auto& nodes = r.graph.nodes;
  nodes.erase(std::remove_if(nodes.begin(), nodes.end(),
                             [&](const Node& n) { return dropped.count(n.id) != 0; }),
              nodes.end());
}

void apply_matmul_bias(GroupGraph& r, const std::map<int32_t, int32_t>& fused) {
  std::set<int32_t> dropped;
  for (const auto& [ba_id, mm_id] : fused) {
    Node& ba = *r.graph.find(ba_id);
    const Node& mm = *r.graph.find(mm_id);
    ba.op = OpKind::matmul;
    ba.inputs = {mm.inputs[0], mm.inputs[1], ba.inputs[1]};
    ba.attrs = mm.attrs;
    dropped.insert(mm_id);
  }
  drop_nodes(r, dropped);
}

// Epilogues of a fused matmul + bias: when the bias_add's only consumer (in the group, not a
// graph output, same dtype) is an activation (gelu, relu, ...) or an add of a residual of the
// same shape, that consumer becomes the matmul (the activation as attribute "epilogue_act",
// the residual as a fourth input) and the bias_add leaves the group: the activation or the
// residual is applied by the instruction that evacuates PSUM, no separate pass is made.
// Returns consumer -> the bias_add (or plain matmul) it takes over.
std::map<int32_t, int32_t> find_matmul_epilogue(const Graph& g, const std::vector<int32_t>& group,
                                                const GraphUses& uses,
                                                const std::map<int32_t, int32_t>& bias) {
  std::map<int32_t, int32_t> fused;
  std::set<int32_t> in_group(group.begin(), group.end());
  for (const auto& [ba_id, mm_id] : bias) {
    const Node& ba = *g.find(ba_id);
    if (uses.is_output(ba_id) || uses.consumers(ba_id).size() != 1) continue;
    const Node* c = g.find(uses.consumers(ba_id)[0]);
    if (!c || !in_group.count(c->id) || c->type.dtype != ba.type.dtype) continue;
    if (c->op != OpKind::add && c->inputs.size() == 1 && lowering::unary_act(c->op)) {
      fused[c->id] = ba_id;
    } else if (c->op == OpKind::add && c->inputs.size() == 2 && c->inputs[0] != c->inputs[1]) {
      const Node* r = g.find(c->inputs[0] == ba_id ? c->inputs[1] : c->inputs[0]);
      if (r && r->type.dims == c->type.dims && r->type.dtype == c->type.dtype &&
          r->type.dims == ba.type.dims)
        fused[c->id] = ba_id;
    }
  }
  // A matmul without a bias whose only consumer is an activation (a decode step's FF1 and
  // gelu), or, for a one-row result, an add of a residual of its shape (a decode step's
  // residuals): the activation, or the residual, is applied as the result leaves PSUM too. The
  // residual takes the bias's input slot: it is the output's shape, so the evacuation adds it.
  // Only for one row: there the separate add is a whole op on the chain for one partition's
  // elements, while with more rows the fused add moves every evacuation to the vector engine
  // (a 128-row prefill: 1.109 -> 1.142 ms).
  for (int32_t id : group) {
    const Node* mm = g.find(id);
    if (!mm || mm->op != OpKind::matmul || mm->inputs.size() != 2 || uses.is_output(id) ||
        uses.consumers(id).size() != 1)
      continue;
    const Node* c = g.find(uses.consumers(id)[0]);
    if (!c || !in_group.count(c->id) || c->type.dtype != mm->type.dtype) continue;
    if (c->op != OpKind::add && c->inputs.size() == 1 && lowering::unary_act(c->op)) {
      fused[c->id] = id;
    } else if (c->op == OpKind::add && c->inputs.size() == 2 && c->inputs[0] != c->inputs[1] &&
               view_of(mm->type).rows == 1) {
      const Node* r = g.find(c->inputs[0] == id ? c->inputs[1] : c->inputs[0]);
      if (r && r->type.dims == mm->type.dims && r->type.dtype == mm->type.dtype &&
          c->type.dims == mm->type.dims)
        fused[c->id] = id;
    }
  }
  return fused;
}

void apply_matmul_epilogue(GroupGraph& r, const std::map<int32_t, int32_t>& fused) {
  std::set<int32_t> dropped;
  for (const auto& [c_id, ba_id] : fused) {
    Node& c = *r.graph.find(c_id);
    const Node& ba = *r.graph.find(ba_id);  // a matmul with its bias by now
    std::vector<int32_t> inputs = ba.inputs;
    auto attrs = ba.attrs;
    if (c.op == OpKind::add) {
      inputs.push_back(c.inputs[0] == ba_id ? c.inputs[1] : c.inputs[0]);
    } else {
      attrs[lowering::kEpilogueAct] = static_cast<int64_t>(*lowering::unary_act(c.op));
    }
    c.op = OpKind::matmul;
    c.inputs = std::move(inputs);
    c.attrs = std::move(attrs);
    dropped.insert(ba_id);
  }
  drop_nodes(r, dropped);
}

std::variant<Lowered, CompileError> run_lowering(const Graph& g, const std::vector<int32_t>& group,
                                                 const isa::ArchSpec& arch,
                                                 const LoweringOptions& options,
                                                 const GraphUses& uses,
                                                 const std::string& plan_name,
                                                 bool rewrite = true) {
  for (int32_t id : group) {
    const Node* n = g.find(id);
    if (!n) return CompileError{id, "?", "not in the graph"};
    for (const Dim& d : n->type.dims) {
      if (d.kind == Dim::Kind::unknown) {
        return CompileError{id, std::string(info(n->op).name),
                            "an unknown dimension cannot be compiled statically", n->name};
      }
    }
  }
  // Rewrites (group_rewrite.h), applied to a copy of the group alone; a rewritten group that
  // does not compile (a bias beside a matmul that fills SBUF, attention the fused kernel cannot
  // tile) is lowered with fewer rewrites, then none.
  if (rewrite) {
    const auto attention = find_attention(g, group, uses);
    const auto bias = find_matmul_bias(g, group, uses, arch, options);
    const auto epilogue = find_matmul_epilogue(g, group, uses, bias);
    for (int pass = attention.empty() ? 1 : 0; pass < 2; ++pass) {
      if (bias.empty() && epilogue.empty() && pass == 1) break;
      GroupGraph r = extract_group(g, group, uses);
      if (pass == 0 && !apply_attention(r, attention, uses)) continue;
      if (!bias.empty()) apply_matmul_bias(r, bias);
      if (!epilogue.empty()) apply_matmul_epilogue(r, epilogue);
      auto fused =
          run_lowering(r.graph, r.group, arch, options, GraphUses(r.graph), plan_name, false);
      if (std::holds_alternative<Lowered>(fused)) return fused;
    }
  }
  const std::vector<int32_t> order = hoist_cache_writes(g, group, uses);
  LoweringContext ctx(g, order, uses, arch, options, plan_name);
  ctx.index_uses(order);
  const LoweringTable& table = lowering_table();
  for (size_t i = 0; i < order.size(); ++i) {
    const Node& n = *g.find(order[i]);
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
    ctx.prefetch_weights(static_cast<int>(i));
  }
  Lowered out;
  out.stats = ctx.stats();
  out.stats.matmul_searched = ctx.matmul_search().searched;
  out.stats.matmul_points = ctx.matmul_search().candidates;
  out.stats.matmul_predicted_ns = ctx.matmul_search().predicted_ns;
  out.stats.matmul_tuned = ctx.matmul_search().tuned;
  out.stats.matmul_tuned_changed = ctx.matmul_search().tuned_changed;
  out.stats.matmul_forced_missed = ctx.matmul_search().forced_missed;
  out.stats.attention_searched = ctx.attention_search.searched;
  out.stats.attention_points = ctx.attention_search.candidates;
  out.stats.attention_predicted_ns = ctx.attention_search.predicted_ns;
  out.plan = ctx.builder().build();
  if (options.schedule_across_ops) out.plan = schedule_plan(std::move(out.plan), arch.costs);
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
  arch.costs.require_priced("compiler_stub::lower_group");
  if (uses) return lowering::run_lowering(g, group, arch, options, *uses, plan_name);
  return lowering::run_lowering(g, group, arch, options, GraphUses(g), plan_name);
}

}  // namespace wallsim::compiler_stub
