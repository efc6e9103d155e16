// Measured tuning of a matmul's schedule (issue 35): the model's best points handed to the
// options' ScheduleTuner (tuning.h) with the op alone as a graph, and the point it returns
// taken. The tuner measures; this file only builds the query and applies the answer.
#include <algorithm>
#include <numeric>

#include "lowering/lowering_context.h"
#include "wallsim/compiler_stub/graph_io.h"
#include "wallsim/compiler_stub/signature.h"
#include "wallsim/compiler_stub/tuning.h"
#include "wallsim/compiler_stub/validate.h"

namespace wallsim::compiler_stub::lowering {

namespace {

base::Json input_node(int id, const char* name, DType dt, int64_t rows, int64_t cols) {
  return {{"id", id},
          {"op", "input"},
          {"name", name},
          {"dtype", std::string(isa::name_of(dt))},
          {"shape", {rows, cols}},
          {"role", "input"}};
}

// C = A . B alone: A [M, K] (or A^T [K, M] and a transpose node), B [K, N] (or B^T [N, K]).
Graph one_op_graph(const MatmulFacts& f, DType a_dt, DType b_dt) {
  base::Json nodes = base::Json::array();
  nodes.push_back(input_node(0, "a", a_dt, f.a_transposed ? f.K : f.M, f.a_transposed ? f.M : f.K));
  nodes.push_back(input_node(1, "b", b_dt, f.b_transposed ? f.N : f.K, f.b_transposed ? f.K : f.N));
  int a = 0, b = 1, id = 2;
  for (auto [is_t, v] : {std::pair{f.a_transposed, &a}, std::pair{f.b_transposed, &b}}) {
    if (!is_t) continue;
    nodes.push_back({{"id", id}, {"op", "transpose"}, {"inputs", {*v}}, {"perm", {1, 0}}});
    *v = id++;
  }
  nodes.push_back({{"id", id}, {"op", "matmul"}, {"inputs", {a, b}}});
  Graph g = graph_from_json({{"format", "wallsim-graph"},
                             {"version", 1},
                             {"name", "tune"},
                             {"nodes", nodes},
                             {"outputs", {id}}});
  infer_types(g);
  return g;
}

}  // namespace

size_t LoweringContext::tuned_pick(const Node& n, const MatmulFacts& f,
                                   const std::vector<MatmulSchedule>& points,
                                   const std::vector<double>& costs, size_t pick) {
  const int32_t aid = n.inputs[0], bid = n.inputs[1];
  // The op alone must be this op: two operands in HBM, plain or transposed views of 2-D tensors,
  // no fused bias or activation (they change its space and its time).
  if (n.inputs.size() != 2 || n.int_attr(kEpilogueAct) || !f.a_loaded ||
      (is_view(aid) && !f.a_transposed) || (is_view(bid) && !f.b_transposed) ||
      ((f.a_transposed || f.b_transposed) &&
       (type_of(aid).dims.size() != 2 || type_of(bid).dims.size() != 2)))
    return pick;
  TuningQuery q;
  q.family = "matmul";
  q.graph = one_op_graph(f, type_of(aid).dtype, type_of(bid).dtype);
  std::vector<int32_t> ops;
  for (const Node& m : q.graph.nodes)
    if (m.op != OpKind::input) ops.push_back(m.id);
  q.signature = group_signature(q.graph, ops, arch_fingerprint(m_arch)).text;
  // The model's pick first, then the rest by predicted time (ties by enumeration order).
  std::vector<size_t> order(points.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    if ((x == pick) != (y == pick)) return x == pick;
    return costs[x] < costs[y];
  });
  order.resize(
      std::min<size_t>(order.size(), size_t(std::max<int64_t>(1, m_options.tune.candidates))));
  for (size_t i : order) q.candidates.push_back({points[i].describe(), costs[i]});
  const std::string chosen = m_options.tuner->choose(q);
  const size_t at = chosen.empty() ? points.size() : find_point(points, chosen);
  if (at == points.size()) return pick;
  ++m_search.tuned;
  m_search.tuned_changed += at != pick;
  return at;
}

}  // namespace wallsim::compiler_stub::lowering
