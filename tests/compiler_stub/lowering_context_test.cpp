// Printed-plan tests of the lowering's shared machinery (lowering/): the op table, DMA queues
// and transfer splitting, SBUF reuse, Belady spilling and row windows, and the options that
// steer them. No SystemC.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "../support/chip_arch.h"
#include "graph_test_util.h"
#include "plan_check.h"

namespace wallsim::compiler_stub::test {
namespace {

// Composites are expanded into other ops before lowering (composites.h).
TEST(LoweringContext, EveryOpOfOpsDefHasALowering) {
  for (int op = 0; op < kNumOps; ++op) {
    if (info(static_cast<OpKind>(op)).kind == OpClass::composite) continue;
    EXPECT_TRUE(has_lowering(static_cast<OpKind>(op))) << name_of(static_cast<OpKind>(op));
  }
}

Graph relu_chain(int64_t rows, int64_t cols, int links) {
  std::string nodes = R"([{"id": 0, "op": "input", "name": "x", "dtype": "fp32", "shape": [)" +
                      std::to_string(rows) + ", " + std::to_string(cols) + "]}";
  for (int i = 1; i <= links; ++i) {
    nodes += R"(, {"id": )" + std::to_string(i) + R"(, "op": "relu", "inputs": [)" +
             std::to_string(i - 1) + "]}";
  }
  return make_graph(nodes + "]", "[" + std::to_string(links) + "]");
}

TEST(LoweringContext, ALargeRowBlockTransferIsSplitByColumnsOrRowsOverTheQueues) {
  // One 128 x 512 fp32 tile is 256 KiB: one piece at the default split, four at 64 KiB; cut by
  // columns when rows may be cut to 512 B, else (the default minimum chunk, 4 KiB, keeps its
  // 2 KiB rows whole) by rows: four pieces of 32 partitions.
  LoweringOptions small_pieces;
  small_pieces.dma_split_bytes = 64 * 1024;
  small_pieces.dma_min_chunk_bytes = 512;
  LoweringOptions long_rows;
  long_rows.dma_split_bytes = 64 * 1024;
  const auto whole = print_plan(relu_chain(128, 512, 1));
  const auto split = print_plan(relu_chain(128, 512, 1), wallsim::test::trn2_arch(),
                                GroupPolicy::whole, small_pieces);
  const auto by_rows = print_plan(relu_chain(128, 512, 1), wallsim::test::trn2_arch(),
                                  GroupPolicy::whole, long_rows);
  // The store takes the least loaded engine: 1, the load having used engine 0.
  EXPECT_EQ(stream_summary(whole.text),
            "ld0: dma_copy x1\n"
            "st1: dma_copy x1\n"
            "scalar: activation.relu x1\n");
  EXPECT_EQ(stream_summary(by_rows.text), stream_summary(split.text));
  EXPECT_TRUE(check_in_order(by_rows.text, {"ld1[0]       dma_copy dst=in_", "[p32:64][+0; 512*1]",
                                            "src=x<fp32>[r32*512][+16384; 512*1]"}))
      << by_rows.text;
  // Pieces on engines 0-3, then the store's pieces on the idle engines 4-7.
  EXPECT_EQ(stream_summary(split.text),
            "ld0: dma_copy x1\n"
            "ld1: dma_copy x1\n"
            "ld2: dma_copy x1\n"
            "ld3: dma_copy x1\n"
            "st4: dma_copy x1\n"
            "st5: dma_copy x1\n"
            "st6: dma_copy x1\n"
            "st7: dma_copy x1\n"
            "scalar: activation.relu x1\n");
  EXPECT_TRUE(check_in_order(split.text, {"ld1[0]       dma_copy dst=in_", "[+128; 128*1]",
                                          "src=x<fp32>[r128*512][+128; 128*1]"}));
}

TEST(LoweringContext, QueueCountsFollowTheOptionsAndTheChip) {
  // One load queue per engine: too few for a class of plan-input loads and one of loads of
  // values the plan writes that each reach every engine, so both take either (on two engines,
  // the four input loads alternate); one store queue per engine.
  isa::ArchSpec two_engines = wallsim::test::trn2_arch();
  two_engines.dma.engines = 2;
  LoweringOptions one_load;
  one_load.load_queues_per_engine = 1;
  const auto p = print_plan(relu_chain(512, 64, 1), two_engines, GroupPolicy::whole, one_load);
  EXPECT_EQ(stream_summary(p.text),
            "ld0: dma_copy x2\n"
            "ld1: dma_copy x2\n"
            "st0: dma_copy x2\n"
            "st1: dma_copy x2\n"
            "scalar: activation.relu x4\n");
  // The default two load queues per engine: on two engines the input loads take the first
  // class (ld0, ld1), and the stores alternate between the engines.
  const auto q = print_plan(relu_chain(512, 64, 1), two_engines);
  EXPECT_EQ(stream_summary(q.text),
            "ld0: dma_copy x2\n"
            "ld1: dma_copy x2\n"
            "st0: dma_copy x2\n"
            "st1: dma_copy x2\n"
            "scalar: activation.relu x4\n");
}

TEST(LoweringContext, QueuesScaleWithTheDmaEngines) {
  // The queue counts are per engine: 20 engines (not the 16 the defaults were tuned on) get 40
  // load queues, of which each class (plan-input loads, ld0-ld19; loads of values the plan
  // writes, ld20-ld39) reaches every engine, and 20 store queues. A fixed count (32 load
  // queues) gave one shared class, and a KV-cache reload queued behind weight prefetch.
  isa::ArchSpec twenty = wallsim::test::trn2_arch();
  twenty.dma.engines = 20;
  const auto p = print_plan(relu_chain(512, 64, 1), twenty);
  std::map<std::string, std::set<int32_t>> engines;  // by queue class
  for (const isa::Stream& s : p.plan().streams) {
    if (s.engine != isa::Engine::dma) continue;
    const bool load = s.name.rfind("ld", 0) == 0;
    const int n = std::stoi(s.name.substr(2));
    engines[load ? (n < 20 ? "inputs" : "dependent") : "stores"].insert(s.dma_engine);
  }
  ASSERT_EQ(engines.size(), 3u);
  for (const auto& [cls, e] : engines) EXPECT_EQ(e.size(), 20u) << cls;
}

TEST(LoweringContext, DeadBuffersAreReusedAndTheReuseWaitsForTheirReaders) {
  isa::ArchSpec small = wallsim::test::trn2_arch();
  small.sbuf.bytes_per_partition = 3 * 2048;  // three 128 x 512 fp32 tiles
  const auto p = print_plan(
      make_graph(R"([{"id": 0, "op": "input", "name": "x", "dtype": "fp32", "shape": [128, 512]},
                     {"id": 1, "op": "relu", "inputs": [0]},
                     {"id": 2, "op": "scale", "inputs": [1], "value": 2.0},
                     {"id": 3, "op": "scale", "inputs": [2], "value": 3.0}])",
                 "[3]"),
      small);
  // x's tile is dead after the relu: v3 takes its bytes, and the vector engine's write must
  // follow the scalar engine's read of the old buffer (the relu) although v3 depends only on
  // v2. vector[0] already waits for that relu, so in-order issue orders vector[1] after it and
  // vector[1] carries no wait of its own on the scalar engine.
  EXPECT_TRUE(check_in_order(p.text, {"buffer    in_8 sbuf p0:128 bytes 0:2048",
                                      "buffer    v3_11 sbuf p0:128 bytes 0:2048"}));
  EXPECT_TRUE(check_in_order(
      p.text, {"vector[0]    tensor_scalar.mul dst=v2_10", "wait(done_scalar>=1)", "@node 2",
               "vector[1]    tensor_scalar.mul dst=v3_11", "src=v2_10", "@node 3"}));
  const size_t v1 = p.text.find("vector[1]");
  ASSERT_NE(v1, std::string::npos);
  EXPECT_EQ(p.text.substr(v1, p.text.find('\n', v1) - v1).find("done_scalar"), std::string::npos);
  EXPECT_EQ(p.stats().spills, 0);
  EXPECT_EQ(p.stats().sbuf_peak_bytes, 3 * 2048);
}

TEST(LoweringContext, WhenSbufIsFullAValueTheOpDoesNotUseIsSpilledToHbmAndReloaded) {
  isa::ArchSpec small = wallsim::test::trn2_arch();
  small.sbuf.bytes_per_partition = 3 * 2048;  // three 128 x 512 fp32 tiles
  // At node 3, v2 and x are the op's operands (pinned) and v3 needs the third slot: v1, next
  // used at node 5, is the one value that may go. It exists only on chip, so it is stored to an
  // HBM scratch tensor (a spill) and reloaded by node 5.
  const Graph g =
      make_graph(R"([{"id": 0, "op": "input", "name": "x", "dtype": "fp32", "shape": [128, 512]},
                     {"id": 1, "op": "relu", "inputs": [0]},
                     {"id": 2, "op": "exp", "inputs": [1]},
                     {"id": 3, "op": "add", "inputs": [2, 0]},
                     {"id": 4, "op": "tanh", "inputs": [3]},
                     {"id": 5, "op": "add", "inputs": [4, 1]}])",
                 "[5]");
  const auto p = print_plan(g, small);
  EXPECT_EQ(p.stats().spills, 1);
  EXPECT_EQ(p.stats().spill_bytes, 128 * 512 * 4);
  // The reload (for node 5) waits for the spill's store (for node 3). It reads a value the plan
  // writes, so it takes a dependent load queue (ld16.., here on engine 2, the least loaded), not
  // one of the prefetch queues ld0..ld15 that carry the plan's inputs.
  EXPECT_TRUE(check_in_order(
      p.text,
      {"tensor    v1 scratch hbm fp32[128,512]", "ld18[0]      dma_copy dst=in_", "src=v1<fp32>",
       "wait(done_st1>=1)", "@node 5", "st1[0]       dma_copy dst=v1<fp32>", "@node 3"}));
  // Without the pressure nothing is spilled.
  EXPECT_EQ(print_plan(g).stats().spills, 0);
}

TEST(LoweringContext, AnOpLargerThanTheTriggerShareRunsInRowWindowsThroughHbm) {
  LoweringOptions eager_windows;
  eager_windows.row_window_trigger_percent = 1;
  eager_windows.row_window_fill_percent = 1;  // four 256-byte row tiles (in and out) a window
  const auto whole = print_plan(relu_chain(1024, 64, 2));
  const auto windowed = print_plan(relu_chain(1024, 64, 2), wallsim::test::trn2_arch(),
                                   GroupPolicy::whole, eager_windows);
  EXPECT_EQ(whole.stats().spills, 0);
  EXPECT_EQ(count_of(whole.text, "tensor    v1 "), 0);
  // v1's windows go to an HBM scratch tensor (one spill); the next op reads them back.
  EXPECT_EQ(windowed.stats().spills, 1);
  EXPECT_TRUE(check_in_order(windowed.text, {"tensor    v1 scratch hbm fp32[1024,64]"}));
  EXPECT_EQ(count_of(windowed.text, "activation.relu"), 16);
  EXPECT_EQ(count_of(windowed.text, "dst=v1<fp32>"), 8);  // every row tile of v1 stored
  EXPECT_EQ(count_of(windowed.text, "src=v1<fp32>"), 8);  // and read back
}

TEST(LoweringContext, HbmScratchOfADeadValueIsReusedByALaterOne) {
  LoweringOptions eager_windows;
  eager_windows.row_window_trigger_percent = 1;
  eager_windows.row_window_fill_percent = 1;
  // x -> v1 -> v2 -> v3 -> v4, each windowed through HBM: v1 is dead once v2 is written, so v3
  // is stored in v1's scratch tensor (and its writes wait for v2's reads of v1).
  const auto p = print_plan(relu_chain(1024, 64, 4), wallsim::test::trn2_arch(), GroupPolicy::whole,
                            eager_windows);
  EXPECT_EQ(p.stats().spills, 3);
  EXPECT_EQ(count_of(p.text, "scratch hbm"), 2);
  EXPECT_EQ(count_of(p.text, "tensor    v3 "), 0);
  EXPECT_EQ(count_of(p.text, "dst=v1<fp32>"), 16);  // v1's and v3's row tiles
  const int64_t value = 1024 * 64 * 4;
  EXPECT_EQ(p.plan().hbm_bytes(), 4 * value);  // x, v1 (and v3), v2, v4: not 5 values
}

TEST(LoweringContext, AValueReadByALaterGroupIsStoredAndOneReadOnlyInsideIsNot) {
  const auto p = print_plan(
      make_graph(R"([{"id": 0, "op": "input", "name": "x", "dtype": "fp32", "shape": [128, 64]},
                     {"id": 1, "op": "relu", "inputs": [0]},
                     {"id": 2, "op": "exp", "inputs": [1]},
                     {"id": 3, "op": "add", "inputs": [2, 1]}])",
                 "[3]"),
      wallsim::test::trn2_arch(), GroupPolicy::per_op);
  ASSERT_EQ(p.compiled.plans.plans.size(), 3u);
  EXPECT_TRUE(
      check_in_order(p.text, {"plan 0", "tensor    v1 output", "plan 1", "tensor    v1 input",
                              "tensor    v2 output", "plan 2", "tensor    v2 input"}));
}

}  // namespace
}  // namespace wallsim::compiler_stub::test
