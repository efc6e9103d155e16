// The 1F1B schedule (issue 38's pipeline parallel): warm-up counts, every micro-batch once each
// way, the programs of a 2-stage pipeline, and no deadlock with blocking sends for any size.
#include "wallsim/workloads/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <map>
#include <tuple>

namespace wallsim::workloads {
namespace {

TEST(PipelineSchedule, WarmupForwardsAreStagesAfterThisOneCappedByMicroBatches) {
  EXPECT_EQ(warmup_forwards(4, 0, 8), 3);
  EXPECT_EQ(warmup_forwards(4, 3, 8), 0);
  EXPECT_EQ(warmup_forwards(4, 0, 2), 2);
  EXPECT_DOUBLE_EQ(bubble_fraction(4, 8), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(bubble_fraction(1, 8), 0.0);
}

TEST(PipelineSchedule, TwoStagesTwoMicroBatches) {
  EXPECT_EQ(describe(pipeline_program(2, 0, 2, true)), "F0 >f0 F1 >f1 <b0 B0 <b1 B1");
  EXPECT_EQ(describe(pipeline_program(2, 1, 2, true)), "<f0 F0 B0 <f1 >b0 F1 B1 >b1");
  EXPECT_EQ(describe(pipeline_program(3, 1, 3, false)), "<f0 F0 >f0 <f1 F1 >f1 <f2 F2 >f2");
}

TEST(PipelineSchedule, EveryMicroBatchForwardThenBackwardOnEveryStage) {
  for (int64_t n = 1; n <= 6; ++n) {
    for (int64_t m = 1; m <= 9; ++m) {
      for (int64_t s = 0; s < n; ++s) {
        std::map<int64_t, int> seen;  // micro -> forwards seen, +10 for a backward after it
        for (const PipeStep& st : pipeline_program(n, s, m, true)) {
          if (st.op == PipeOp::forward) ++seen[st.micro];
          if (st.op == PipeOp::backward) {
            EXPECT_EQ(seen[st.micro], 1) << n << " " << s << " " << m;
            seen[st.micro] += 10;
          }
        }
        ASSERT_EQ(int64_t(seen.size()), m);
        for (const auto& [micro, count] : seen) EXPECT_EQ(count, 11) << micro;
      }
    }
  }
}

// Every stage's program run with rendezvous sends and receives (each blocks until its partner,
// the same route's next, is at the head of the other stage's program) completes.
bool completes(int64_t n, int64_t m, bool training) {
  std::vector<std::vector<PipeStep>> p;
  for (int64_t s = 0; s < n; ++s) p.push_back(pipeline_program(n, s, m, training));
  std::vector<size_t> at(static_cast<size_t>(n), 0);
  const auto head = [&](int64_t s) -> const PipeStep* {
    if (s < 0 || s >= n || at[size_t(s)] >= p[size_t(s)].size()) return nullptr;
    return &p[size_t(s)][at[size_t(s)]];
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (int64_t s = 0; s < n; ++s) {
      const PipeStep* h = head(s);
      if (!h) continue;
      if (h->op == PipeOp::forward || h->op == PipeOp::backward) {
        ++at[size_t(s)];
        moved = true;
        continue;
      }
      const bool fwd = h->op == PipeOp::send_forward, bwd = h->op == PipeOp::send_backward;
      if (!fwd && !bwd) continue;  // a recv moves with its send
      const int64_t peer = fwd ? s + 1 : s - 1;
      const PipeStep* o = head(peer);
      const PipeOp want = fwd ? PipeOp::recv_forward : PipeOp::recv_backward;
      if (o && o->op == want && o->micro == h->micro) {
        ++at[size_t(s)];
        ++at[size_t(peer)];
        moved = true;
      }
    }
  }
  for (int64_t s = 0; s < n; ++s) {
    if (head(s)) return false;
  }
  return true;
}

TEST(PipelineSchedule, BlockingSendsNeverDeadlock) {
  for (int64_t n = 1; n <= 8; ++n) {
    for (int64_t m = 1; m <= 12; ++m) {
      EXPECT_TRUE(completes(n, m, true)) << n << " stages, " << m << " micro-batches";
      EXPECT_TRUE(completes(n, m, false)) << n << " stages, " << m << " micro-batches";
    }
  }
}

}  // namespace
}  // namespace wallsim::workloads
