// The fused mode's materialization heuristics on small op streams: each heuristic alone, then
// composed, with the expected cut points (boundary b lies after op b).
#include <gtest/gtest.h>

#include <set>

#include "wallsim/runtime/config.h"
#include "wallsim/runtime/materialize.h"

namespace wallsim::runtime {
namespace {

using compiler_stub::Dim;
using compiler_stub::Graph;
using compiler_stub::Node;
using compiler_stub::OpKind;

// A pending graph built op by op: inputs (weights, activations) and ops of shape [rows, cols].
struct Stream {
  Graph g;
  std::vector<int32_t> ops;
  std::set<int32_t> marked;
  LazyConfig lazy;

  int32_t input(int64_t rows = 128, int64_t cols = 128) {
    Node n;
    n.id = static_cast<int32_t>(g.nodes.size());
    n.op = OpKind::input;
    n.type.dtype = isa::DType::bf16;
    n.type.dims = {Dim::of(rows), Dim::of(cols)};
    g.nodes.push_back(n);
    return n.id;
  }
  int32_t op(OpKind k, std::vector<int32_t> in, std::vector<Dim> dims = {}) {
    Node n;
    n.id = static_cast<int32_t>(g.nodes.size());
    n.op = k;
    n.inputs = std::move(in);
    n.type.dtype = isa::DType::bf16;
    n.type.dims = dims.empty() ? std::vector<Dim>{Dim::of(128), Dim::of(128)} : dims;
    g.nodes.push_back(n);
    ops.push_back(n.id);
    return n.id;
  }
  std::vector<size_t> cuts(std::vector<Heuristic> set) const {
    const OpStream s{ops, g, lazy, marked};
    return plan_cuts(s, set).cuts();
  }
};

using Cuts = std::vector<size_t>;

TEST(Materialize, DefaultIsEveryHeuristicAndNamesRoundTrip) {
  EXPECT_EQ(default_heuristics().size(), static_cast<size_t>(kNumHeuristics));
  EXPECT_EQ(name_of(Heuristic::repeated), "repeated");
  EXPECT_EQ(LazyConfig{}.heuristics, default_heuristics());
  base::Json j = base::Json::parse(R"({"heuristics": ["size", "fanout"]})");
  LazyConfig c;
  base::read_params(j, c, "runtime.lazy");
  EXPECT_EQ(c.heuristics, (std::vector<Heuristic>{Heuristic::size, Heuristic::fanout}));
  base::Json bad = base::Json::parse(R"({"heuristics": ["psychic"]})");
  EXPECT_THROW(base::read_params(bad, c, "runtime.lazy"), base::InputError);
}

// x = a @ w; y = gelu(x); z = x + y: x has two readers, so the stream is cut after it.
TEST(Materialize, FanoutCutsAfterAValueWithTwoReaders) {
  Stream s;
  const int32_t a = s.input(), w = s.input();
  const int32_t x = s.op(OpKind::matmul, {a, w});  // op 0: read by 1 and 2
  const int32_t y = s.op(OpKind::gelu, {x});       // op 1
  s.op(OpKind::add, {x, y});                       // op 2
  EXPECT_EQ(s.cuts({Heuristic::fanout}), (Cuts{0}));
  EXPECT_EQ(s.cuts({Heuristic::size}), (Cuts{}));
}

// A matmul's fanout value is kept; an element-wise one is cheaper to re-execute.
TEST(Materialize, ReexecuteWithdrawsFanoutCutsOfCheapValues) {
  Stream s;
  const int32_t a = s.input(), w = s.input();
  const int32_t m = s.op(OpKind::matmul, {a, w});  // op 0: MACs, stays materialised
  const int32_t r = s.op(OpKind::relu, {m});       // op 1: cheap, read twice
  const int32_t e = s.op(OpKind::exp, {r});        // op 2
  const int32_t t = s.op(OpKind::tanh, {r});       // op 3
  s.op(OpKind::add, {e, t});                       // op 4
  s.op(OpKind::add, {m, m});                       // op 5
  EXPECT_EQ(s.cuts({Heuristic::fanout}), (Cuts{0, 1}));
  EXPECT_EQ(s.cuts({Heuristic::fanout, Heuristic::reexecute}), (Cuts{0}));
  // A veto withdraws only what fanout asked for.
  s.marked.insert(r);
  EXPECT_EQ(s.cuts({Heuristic::fanout, Heuristic::reexecute, Heuristic::marked_split}),
            (Cuts{0, 1}));
}

// A KV append writes its cache in place: the old cache is stale after it.
TEST(Materialize, StaleBuffersCutAfterAnInPlaceWrite) {
  Stream s;
  const int32_t cache = s.input(), x = s.input(1, 128);
  const int32_t k = s.op(OpKind::relu, {x}, {Dim::of(1), Dim::of(128)});  // op 0
  const int32_t c2 = s.op(OpKind::dynamic_update_slice, {cache, k});      // op 1
  s.op(OpKind::exp, {c2});                                                // op 2
  EXPECT_EQ(s.cuts({Heuristic::stale_buffers}), (Cuts{1}));
}

// An op with an unknown (data-dependent) dimension sits alone; a bounded one compiles once at
// its bound and is not cut.
TEST(Materialize, DynamicSplitIsolatesOpsWithDynamicDimensions) {
  Stream s;
  const int32_t a = s.input();
  const int32_t b = s.op(OpKind::relu, {a});                                            // op 0
  const int32_t c = s.op(OpKind::exp, {b}, {Dim::unknown(), Dim::of(128)});             // op 1
  const int32_t d = s.op(OpKind::exp, {c}, {Dim::unknown(), Dim::of(128)});             // op 2
  const int32_t e = s.op(OpKind::tanh, {d}, {Dim::bounded(128, "len"), Dim::of(128)});  // op 3
  s.op(OpKind::relu, {e}, {Dim::bounded(128, "len"), Dim::of(128)});                    // op 4
  EXPECT_EQ(s.cuts({Heuristic::dynamic_split}), (Cuts{0, 1, 2}));
}

TEST(Materialize, MarkedSplitCutsWhereTheWorkloadMarked) {
  Stream s;
  int32_t v = s.input();
  for (int i = 0; i < 5; ++i) v = s.op(OpKind::relu, {v});
  s.marked = {s.ops[1], s.ops[3]};
  EXPECT_EQ(s.cuts({Heuristic::marked_split}), (Cuts{1, 3}));
}

TEST(Materialize, NotFusibleAndSizeAreTodaysRules) {
  Stream s;
  int32_t v = s.input();
  for (int i = 0; i < 7; ++i) v = s.op(i == 2 ? OpKind::softmax : OpKind::relu, {v});
  s.lazy.not_fusible = {OpKind::softmax};
  EXPECT_EQ(s.cuts({Heuristic::not_fusible}), (Cuts{1, 2}));
  s.lazy.max_group_ops = 2;
  // softmax alone; the size limit splits what is left in twos: [0 1] [2] [3 4] [5 6].
  EXPECT_EQ(s.cuts({Heuristic::not_fusible, Heuristic::size}), (Cuts{1, 2, 4}));
  EXPECT_EQ(s.cuts({Heuristic::size}), (Cuts{1, 3, 5}));
}

// Three "layers" of 12 ops after a 2-op prologue and before a 1-op epilogue: cuts at each
// layer's ends, so the layers become groups with one op-name sequence.
TEST(Materialize, RepeatedCutsAtTheEndsOfRepeatedSubsequences) {
  Stream s;
  int32_t v = s.input();
  v = s.op(OpKind::iota, {});
  v = s.op(OpKind::scale, {v});
  const OpKind layer[12] = {OpKind::layernorm, OpKind::matmul,   OpKind::bias_add, OpKind::gelu,
                            OpKind::matmul,    OpKind::bias_add, OpKind::add,      OpKind::rmsnorm,
                            OpKind::matmul,    OpKind::silu,     OpKind::mul,      OpKind::add};
  for (int l = 0; l < 3; ++l) {
    for (OpKind k : layer) v = s.op(k, {v});
  }
  v = s.op(OpKind::softmax, {v});
  // layers are ops 2-13, 14-25, 26-37; softmax is op 38
  EXPECT_EQ(s.cuts({Heuristic::repeated}), (Cuts{1, 13, 25, 37}));
  // The window: a period under repeat_min_ops is not looked for.
  s.lazy.repeat_min_ops = 13;
  s.lazy.repeat_max_ops = 20;
  EXPECT_EQ(s.cuts({Heuristic::repeated}), (Cuts{}));
}

// Groups follow the cuts, in program order, every op once.
TEST(Materialize, GroupsFollowTheCuts) {
  CutPlan plan(5);
  plan.cut_after(1, Heuristic::fanout);
  plan.cut_around(3, Heuristic::dynamic_split);
  plan.cut_after(4, Heuristic::fanout);  // the end of the stream: no boundary
  EXPECT_EQ(plan.groups({10, 11, 12, 13, 14}),
            (std::vector<std::vector<int32_t>>{{10, 11}, {12}, {13}, {14}}));
}

}  // namespace
}  // namespace wallsim::runtime
