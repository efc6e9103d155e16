// Unit tests of the DMA-queue planner (dma_queues.h): the queue layout per chip and the queue
// each transfer takes, from bytes, role and position alone. No plan, no SystemC.
#include "wallsim/compiler_stub/dma_queues.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace wallsim::compiler_stub {
namespace {

std::map<QueueClass, std::set<int64_t>> engines_by_class(const std::vector<QueueSpec>& specs) {
  std::map<QueueClass, std::set<int64_t>> e;
  for (const QueueSpec& q : specs) e[q.cls].insert(q.engine);
  return e;
}

TEST(DmaQueueLayout, EachClassCoversEveryEngineWithTwoLoadClassesOnlyWhereBothCan) {
  // trn2: 16 engines x 4 queues; 2 load and 1 store queue per engine: 32 loads, two classes.
  const auto trn2 = dma_queue_layout(16, 64, 2, 1);
  ASSERT_EQ(trn2.size(), 48u);
  auto e = engines_by_class(trn2);
  EXPECT_EQ(e[QueueClass::input_load].size(), 16u);
  EXPECT_EQ(e[QueueClass::dependent_load].size(), 16u);
  EXPECT_EQ(e[QueueClass::store].size(), 16u);
  // tiny: 4 engines x 2 queues; 4 stores leave 4 loads, fewer than two per engine: one class,
  // so plan-input loads still reach every engine.
  const auto tiny = dma_queue_layout(4, 8, 2, 1);
  ASSERT_EQ(tiny.size(), 8u);
  e = engines_by_class(tiny);
  EXPECT_EQ(e[QueueClass::input_load].size(), 4u);
  EXPECT_EQ(e.count(QueueClass::dependent_load), 0u);
  EXPECT_EQ(e[QueueClass::store].size(), 4u);
  // Loads are declared before stores, named by their rank in their kind.
  EXPECT_EQ(tiny.front().name, "ld0");
  EXPECT_EQ(tiny.back().name, "st3");
  // At least one queue of each kind even when the chip has fewer than the options ask for.
  const auto one = dma_queue_layout(1, 2, 8, 8);
  ASSERT_EQ(one.size(), 2u);
  EXPECT_EQ(one[0].cls, QueueClass::input_load);
  EXPECT_EQ(one[1].cls, QueueClass::store);
}

// Two engines; stream keys 0 and 1 are compute streams. Input loads 2 (engine 0) and 3
// (engine 1), dependent loads 4 (engine 0) and 5 (engine 1), stores 6 (engine 0), 7 (engine 1).
DmaQueuePlanner two_engines() {
  DmaQueuePlanner p(2);
  p.add_queue(2, 0, QueueClass::input_load);
  p.add_queue(3, 1, QueueClass::input_load);
  p.add_queue(4, 0, QueueClass::dependent_load);
  p.add_queue(5, 1, QueueClass::dependent_load);
  p.add_queue(6, 0, QueueClass::store);
  p.add_queue(7, 1, QueueClass::store);
  return p;
}

TEST(DmaQueuePlanner, OnlyTheQueuesGivenAreQueues) {
  const DmaQueuePlanner p = two_engines();
  EXPECT_FALSE(p.is_queue(0));
  EXPECT_FALSE(p.is_queue(1));
  EXPECT_TRUE(p.is_queue(2));
  EXPECT_TRUE(p.is_queue(7));
  EXPECT_FALSE(p.is_queue(8));
  EXPECT_FALSE(p.is_queue(-1));
  EXPECT_EQ(p.load_queue_count(), 2);
  EXPECT_EQ(p.store_queue_count(), 2);
}

TEST(DmaQueuePlanner, LoadsAndStoresTogetherEvenOutTheEngines) {
  DmaQueuePlanner p = two_engines();
  EXPECT_EQ(p.next_load(), 2);  // a tie: the first
  p.record(2, 100, 0);
  EXPECT_EQ(p.next_load(), 3);  // engine 1 has carried nothing
  EXPECT_EQ(p.next_store(), 7);
  p.record(7, 300, 0);  // a store on engine 1 counts against its loads too
  EXPECT_EQ(p.next_load(), 2);
  EXPECT_EQ(p.next_side_load(), 4);
  EXPECT_EQ(p.engine_bytes(0), 100);
  EXPECT_EQ(p.engine_bytes(1), 300);
  // Engines tied, the queue with the fewest bytes.
  p.record(4, 200, 0);  // engine 0: 300 bytes, as engine 1; 100 on queue 2, none on queue 3
  EXPECT_EQ(p.next_load(), 3);
  EXPECT_EQ(p.next_side_load(), 5);
  EXPECT_EQ(p.queue_bytes(4), 200);
  EXPECT_EQ(p.engine_of(5), 1);
}

TEST(DmaQueuePlanner, OneOpsDependentLoadsSpreadOverEveryEngine) {
  DmaQueuePlanner p = two_engines();
  p.record(3, 1000, 0);  // engine 1 carries far more than engine 0
  // Op 7's reload of a value the plan wrote: the dependent queues, whatever was proposed.
  int q = p.place_load(2, /*input=*/false, /*node=*/7, /*position=*/3);
  EXPECT_EQ(q, 4);
  p.record(q, 100, 7);
  // Its next piece goes to the engine this op has not used yet, though it is the busier one.
  q = p.place_load(2, false, 7, 3);
  EXPECT_EQ(q, 5);
  p.record(q, 100, 7);
  // A new op starts its own spread: the least loaded engine first again.
  EXPECT_EQ(p.place_load(2, false, 8, 4), 4);
}

TEST(DmaQueuePlanner, AnInputLoadKeepsItsQueueUntilWeightsArePrefetched) {
  DmaQueuePlanner p = two_engines();
  // A plan input loaded for a later phase on a side queue stays there.
  EXPECT_EQ(p.place_load(p.next_side_load(), /*input=*/true, 7, 0), 4);
  EXPECT_EQ(p.place_load(3, true, 7, 0), 3);
}

TEST(DmaQueuePlanner, AfterAPrefetchAnInputLoadSkipsQueuesHoldingLaterOpsLoads) {
  DmaQueuePlanner p = two_engines();
  // At position 1, the weights of the op at position 5 are prefetched on queue 2.
  p.begin_prefetch(5);
  EXPECT_TRUE(p.prefetching());
  EXPECT_EQ(p.place_load(2, true, 50, 1), 2);
  p.record(2, 10, 50);
  p.end_prefetch();
  EXPECT_FALSE(p.prefetching());
  // The op at position 2 needs an input now: not behind op 5's weights, though queue 2's
  // engine is the less loaded one.
  p.record(7, 1000, 0);
  EXPECT_EQ(p.place_load(2, true, 20, 2), 3);
  // Both load queues now serve op 2 or op 5; op 2's next input load takes queue 3 again.
  EXPECT_EQ(p.place_load(2, true, 20, 2), 3);
  // Once every input-load queue holds a later op's load, a dependent queue.
  p.begin_prefetch(6);
  p.place_load(3, true, 60, 2);
  p.end_prefetch();
  EXPECT_EQ(p.place_load(2, true, 20, 2), 4);
  // By op 5's turn queue 2 is clear again; queue 3 still holds op 6's load.
  EXPECT_EQ(p.place_load(3, true, 50, 5), 2);
}

}  // namespace
}  // namespace wallsim::compiler_stub
