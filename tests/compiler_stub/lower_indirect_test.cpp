// Printed-plan tests of the indirect-access family (lower_indirect.cpp): embedding gathers,
// index_copy scatters in place, dynamic_update_slice writes at a run-time position. No SystemC.
#include <gtest/gtest.h>

#include "graph_test_util.h"
#include "plan_check.h"

namespace wallsim::compiler_stub::test {
namespace {

TEST(LowerIndirect, AnEmbeddingLoadsEachTilesIdsThenGathersOnTheSameQueue) {
  const auto p = print_plan(make_graph(
      R"([{"id": 0, "op": "input", "name": "table", "dtype": "bf16", "shape": [1000, 64]},
          {"id": 1, "op": "input", "name": "ids", "dtype": "int32", "shape": [200]},
          {"id": 2, "op": "embedding", "inputs": [0, 1]}])",
      "[2]"));
  // 200 rows: two row tiles (128 + 72), each an ids load and a gather on one load queue.
  EXPECT_EQ(stream_summary(p.text),
            "ld0: dma_copy x1\n"
            "ld0: dma_gather x1\n"
            "ld1: dma_copy x1\n"
            "ld1: dma_gather x1\n"
            "st2: dma_copy x1\n"
            "st3: dma_copy x1\n");
  EXPECT_TRUE(check_in_order(
      p.text, {"ld1[0]       dma_copy dst=ids_", "src=ids<int32>",
               "ld1[1]       dma_gather dst=v2_", "table=table<bf16>[r1000*64]", "index=ids_"}));
  EXPECT_EQ(p.stats().hbm_bytes_in, 200 * (4 + 64 * 2));
}

TEST(LowerIndirect, AnIndexCopyScattersIntoTheCacheInPlaceOnTheStoreQueues) {
  const auto p = print_plan(make_graph(
      R"([{"id": 0, "op": "input", "name": "pool", "dtype": "bf16", "shape": [300, 48]},
          {"id": 1, "op": "input", "name": "slots", "dtype": "int32", "shape": [140]},
          {"id": 2, "op": "input", "name": "x", "dtype": "bf16", "shape": [140, 48]},
          {"id": 3, "op": "relu", "inputs": [2]},
          {"id": 4, "op": "index_copy", "inputs": [0, 1, 3]}])",
      "[4]"));
  EXPECT_TRUE(check_in_order(p.text, {"tensor    pool inout hbm bf16[300,48]"}));
  EXPECT_EQ(count_of(p.text, "tensor    v4"), 0);  // the result is the pool itself
  EXPECT_TRUE(check_in_order(stream_summary(p.text), {"st2: dma_copy x1\nst2: dma_scatter x1\n",
                                                      "st3: dma_copy x1\nst3: dma_scatter x1\n"}));
  EXPECT_TRUE(
      check_in_order(p.text, {"dma_scatter dst=pool<bf16>", "src=v3_", "wait(done_scalar"}));
}

TEST(LowerIndirect, AnAppendWritesTheCacheAtTheRunTimePosition) {
  const auto p = print_plan(make_graph(
      R"([{"id": 0, "op": "input", "name": "cache", "dtype": "fp32", "shape": [16, 8]},
          {"id": 1, "op": "input", "name": "new", "dtype": "fp32", "shape": [1, 8]},
          {"id": 2, "op": "dynamic_update_slice", "inputs": [0, 1], "scalar": "pos"}])",
      "[2]", R"([{"name": "pos", "min": 0, "max": 15}])"));
  EXPECT_TRUE(
      check_in_order(p.text, {"scalar    $pos in [0, 15]", "tensor    cache inout hbm fp32[16,8]",
                              "dma_copy dst=cache<fp32>[r1*8][+0+pos*8; 8*1]"}));
}

// A decode step's projections: q and k from the same h, k appended to the cache. The append
// and k's matmul are lowered first (cache_write_order.h), so the write runs beside q's matmul;
// when the cache's old value has another reader, the order stays as written.
std::vector<std::string> lowering_order(bool old_value_read) {
  const auto p = print_plan(make_graph(
      std::string(R"([{"id": 0, "op": "input", "name": "cache", "dtype": "fp32", "shape": [16, 64]},
          {"id": 1, "op": "input", "name": "h", "dtype": "fp32", "shape": [1, 64]},
          {"id": 2, "op": "input", "name": "wq", "dtype": "fp32", "shape": [64, 64]},
          {"id": 3, "op": "input", "name": "wk", "dtype": "fp32", "shape": [64, 64]},
          {"id": 4, "op": "matmul", "inputs": [1, 2]},
          {"id": 5, "op": "matmul", "inputs": [1, 3]},
          {"id": 6, "op": "dynamic_update_slice", "inputs": [0, 5], "scalar": "pos"})") +
          (old_value_read ? R"(, {"id": 7, "op": "relu", "inputs": [0]}])" : "]"),
      old_value_read ? "[4, 6, 7]" : "[4, 6]", R"([{"name": "pos", "min": 0, "max": 15}])"));
  std::vector<std::string> order;
  for (const auto& n : p.plan().nodes) order.push_back(std::to_string(n.id) + " " + n.op);
  return order;
}

TEST(LowerIndirect, ACacheWriteAndItsUpdateAreLoweredBeforeTheOtherProjection) {
  EXPECT_EQ(lowering_order(false),
            (std::vector<std::string>{"5 matmul", "6 dynamic_update_slice", "4 matmul"}));
  EXPECT_EQ(lowering_order(true),
            (std::vector<std::string>{"4 matmul", "5 matmul", "6 dynamic_update_slice", "7 relu"}));
}

TEST(LowerIndirect, IdsComputedOnTheChipAreRefused) {
  EXPECT_EQ(compile_error(make_graph(
                R"([{"id": 0, "op": "input", "name": "table", "dtype": "bf16", "shape": [10, 8]},
                    {"id": 1, "op": "iota", "shape": [4], "dtype": "int32", "axis": 0},
                    {"id": 2, "op": "embedding", "inputs": [0, 1]}])",
                "[2]")),
            "node 2 (embedding): embedding ids computed on the chip are not supported yet");
  // A named node (an imported ONNX node's name, with its module path) is named by it.
  EXPECT_EQ(compile_error(make_graph(
                R"([{"id": 0, "op": "input", "name": "table", "dtype": "bf16", "shape": [10, 8]},
                    {"id": 1, "op": "iota", "shape": [4], "dtype": "int32", "axis": 0},
                    {"id": 2, "op": "embedding", "inputs": [0, 1], "name": "/emb/Gather"}])",
                "[2]")),
            "'/emb/Gather' (embedding, node 2): embedding ids computed on the chip are not "
            "supported yet");
}

}  // namespace
}  // namespace wallsim::compiler_stub::test
