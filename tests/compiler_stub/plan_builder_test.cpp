// PlanBuilder: semaphores come from cross-engine dependencies only, counted in order.
#include "wallsim/compiler_stub/plan_builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "../support/chip_arch.h"
#include "slot_instructions.h"
#include "wallsim/isa/verifier.h"

namespace wallsim::compiler_stub {
namespace {

using isa::Engine;
using isa::Instruction;
using isa::Opcode;

using test::act;
using test::ap;
using test::copy;

TEST(PlanBuilder, ReadAfterWriteAcrossEnginesWaits) {
  PlanBuilder b("p");
  Slot x = b.add_buffer(isa::MemSpace::sbuf, 0, 32, 0, 64, "x");
  Slot y = b.add_buffer(isa::MemSpace::sbuf, 0, 32, 64, 64, "y");
  Slot z = b.add_buffer(isa::MemSpace::sbuf, 0, 32, 128, 64, "z");
  const int vec = b.stream(Engine::vector), sc = b.stream(Engine::scalar);
  b.emit(vec, copy(y, x));  // writes y
  b.emit(vec, copy(z, x));  // same engine: no sync needed later for this one
  b.emit(sc, act(z, y));    // reads y (RAW on vector[0]) and writes z (WAW on vector[1])
  isa::Plan p = b.build();
  ASSERT_EQ(p.semaphores.size(), 1u);
  EXPECT_EQ(p.semaphores[0], "done_vector");
  const auto& v = p.streams[0].instructions;
  EXPECT_EQ(v[0].signals.size(), 0u);  // only the latest producer signals
  ASSERT_EQ(v[1].signals.size(), 1u);
  ASSERT_EQ(p.streams[1].instructions[0].waits.size(), 1u);
  EXPECT_EQ(p.streams[1].instructions[0].waits[0].value, 1);
  isa::ArchSpec arch = wallsim::test::trn2_arch();
  EXPECT_TRUE(isa::verify(p, arch).empty());
}

TEST(PlanBuilder, WriteAfterReadWaitsForTheReaders) {
  PlanBuilder b("p");
  Slot x = b.add_buffer(isa::MemSpace::sbuf, 0, 32, 0, 64, "x");
  Slot y = b.add_buffer(isa::MemSpace::sbuf, 0, 32, 64, 64, "y");
  const int vec = b.stream(Engine::vector), sc = b.stream(Engine::scalar);
  b.emit(sc, act(y, x));    // scalar reads x
  b.emit(vec, copy(x, y));  // vector overwrites x: after the read, and reads y after its write
  isa::Plan p = b.build();
  const auto& waits = p.streams[0].instructions[0].waits;  // the vector instruction
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(p.semaphores[waits[0].sem], "done_scalar");
}

TEST(PlanBuilder, OnlyTheLatestProducerPerStreamIsWaitedFor) {
  PlanBuilder b("p");
  Slot s[4];
  for (int i = 0; i < 4; ++i) s[i] = b.add_buffer(isa::MemSpace::sbuf, 0, 32, 64 * i, 64, "s");
  const int vec = b.stream(Engine::vector), sc = b.stream(Engine::scalar);
  b.emit(vec, copy(s[1], s[0]));
  b.emit(vec, copy(s[2], s[0]));
  b.emit(sc, act(s[3], s[2]));  // RAW on vector[1]
  b.emit(sc, act(s[0], s[1]));  // RAW on vector[0], WAR on s[0] after vector[0] and [1]
  isa::Plan p = b.build();
  const auto& v = p.streams[0].instructions;
  const auto& scalar = p.streams[1].instructions;
  // In-order retirement makes "vector[1] done" imply "vector[0] done": one signal suffices.
  EXPECT_EQ(v[0].signals.size(), 0u);
  ASSERT_EQ(v[1].signals.size(), 1u);
  ASSERT_EQ(scalar[0].waits.size(), 1u);
  EXPECT_EQ(scalar[0].waits[0].value, 1);
  // scalar[1] needs vector[1] too, which scalar[0] already waited for: in-order issue covers it.
  EXPECT_EQ(scalar[1].waits.size(), 0u);
}

TEST(PlanBuilder, AWaitAnEarlierInstructionOfTheStreamMadeIsDropped) {
  PlanBuilder b("p");
  Slot s[6];
  for (int i = 0; i < 6; ++i) s[i] = b.add_buffer(isa::MemSpace::sbuf, 0, 32, 64 * i, 64, "s");
  const int vec = b.stream(Engine::vector), sc = b.stream(Engine::scalar);
  b.emit(vec, copy(s[1], s[0]));  // vector[0]
  b.emit(vec, copy(s[2], s[0]));  // vector[1]
  b.emit(sc, act(s[3], s[2]));    // waits for vector[1]
  b.emit(sc, act(s[4], s[1]));    // vector[0] is older than vector[1]: no wait
  b.emit(vec, copy(s[5], s[0]));  // vector[2]
  b.emit(sc, act(s[0], s[5]));    // vector[2] is newer: waits (count 2), and the WAR on s[0]
  isa::Plan p = b.build();
  const auto& v = p.streams[0].instructions;
  const auto& scalar = p.streams[1].instructions;
  ASSERT_EQ(scalar[0].waits.size(), 1u);
  EXPECT_EQ(scalar[0].waits[0].value, 1);
  EXPECT_EQ(scalar[1].waits.size(), 0u);
  ASSERT_EQ(scalar[2].waits.size(), 1u);
  EXPECT_EQ(scalar[2].waits[0].value, 2);
  EXPECT_EQ(v[0].signals.size(), 0u);  // nobody waits for vector[0] any more
  EXPECT_EQ(v[1].signals.size(), 1u);
  EXPECT_EQ(v[2].signals.size(), 1u);
  isa::ArchSpec arch = wallsim::test::trn2_arch();
  EXPECT_TRUE(isa::verify(p, arch).empty());
}

TEST(PlanBuilder, SignalCountsFollowStreamOrder) {
  PlanBuilder b("p");
  Slot s[4];
  for (int i = 0; i < 4; ++i) s[i] = b.add_buffer(isa::MemSpace::sbuf, 0, 32, 64 * i, 64, "s");
  const int vec = b.stream(Engine::vector), sc = b.stream(Engine::scalar);
  b.emit(vec, copy(s[1], s[0]));
  b.emit(sc, act(s[2], s[1]));  // needs vector[0]: count 1
  b.emit(vec, copy(s[3], s[0]));
  b.emit(sc, act(s[0], s[3]));  // needs vector[1] (the third... second signaller): count 2
  isa::Plan p = b.build();
  const auto& scalar = p.streams[1].instructions;
  EXPECT_EQ(scalar[0].waits[0].value, 1);
  EXPECT_EQ(scalar[1].waits[0].value, 2);
  isa::ArchSpec arch = wallsim::test::trn2_arch();
  EXPECT_TRUE(isa::verify(p, arch).empty());
}

// A DMA between rows [r0, r0 + rows) x columns [c0, c0 + cols) of the fp32 HBM tensor `t`
// (row pitch 64 elements) and the first `cols` columns of SBUF buffer `s` (rows partitions).
// Each test gives every DMA a buffer of its own, so only the tensor orders them.
isa::Instruction hbm_dma(Slot t, Slot s, int64_t r0, int64_t rows, int64_t c0, int64_t cols,
                         bool store) {
  isa::AccessPattern h;
  h.space = isa::MemSpace::hbm;
  h.buffer = t.index;
  h.dtype = isa::DType::fp32;
  h.partitions = static_cast<int32_t>(rows);
  h.partition_stride = 64;
  h.offset = r0 * 64 + c0;
  h.num_free = 1;
  h.free[0] = {cols, 1};
  isa::AccessPattern on = h;
  on.space = s.space;
  on.buffer = s.index;
  on.partition_stride = 0;
  on.offset = 0;
  isa::Instruction in;
  in.op = isa::Opcode::dma_copy;
  in.dst = store ? h : on;
  in.src[0] = store ? on : h;
  return in;
}

// The producers (stream names) instruction 0 of `stream` waits for.
std::vector<std::string> waited_by(const isa::Plan& p, int stream) {
  std::vector<std::string> out;
  for (const auto& w : p.streams[static_cast<size_t>(stream)].instructions[0].waits)
    out.push_back(p.semaphores[static_cast<size_t>(w.sem)]);
  std::sort(out.begin(), out.end());
  return out;
}

// Off chip, accesses of several rows are boxes of their row pitch: two column panels of one
// output do not wait for each other (their byte ranges interleave), a box that meets both waits
// for both, and a box compared with an access of another shape falls back to byte ranges.
TEST(PlanBuilder, ColumnPanelsOfOneTensorDoNotWaitForEachOther) {
  PlanBuilder b("p");
  Slot t =
      b.add_tensor("c", isa::MemSpace::hbm, isa::DType::fp32, {32, 64}, isa::TensorRole::output);
  int q[5];
  Slot s[5];
  for (int i = 0; i < 5; ++i) {
    q[i] = b.add_queue("q" + std::to_string(i), i);
    s[i] = b.add_buffer(isa::MemSpace::sbuf, 0, 32, 256 * i, 256, "s");
  }
  b.emit(q[0], hbm_dma(t, s[0], 0, 32, 0, 32, true));     // columns 0..31
  b.emit(q[1], hbm_dma(t, s[1], 0, 32, 32, 32, true));    // columns 32..63: disjoint
  b.emit(q[2], hbm_dma(t, s[2], 16, 16, 24, 16, false));  // rows 16..31, columns 24..39: both
  b.emit(q[3], hbm_dma(t, s[3], 0, 16, 40, 8, false));    // rows 0..15, columns 40..47: q1 only
  // One row of 64 columns: no box (a single row has no pitch), so byte ranges decide: row 0's
  // bytes lie inside both panels' byte ranges.
  b.emit(q[4], hbm_dma(t, s[4], 0, 1, 0, 64, false));
  isa::Plan p = b.build();
  EXPECT_TRUE(waited_by(p, q[1]).empty());
  EXPECT_EQ(waited_by(p, q[2]), (std::vector<std::string>{"done_q0", "done_q1"}));
  EXPECT_EQ(waited_by(p, q[3]), (std::vector<std::string>{"done_q1"}));
  EXPECT_EQ(waited_by(p, q[4]), (std::vector<std::string>{"done_q0", "done_q1"}));
}

// A box write drops from the history only the boxes of its pitch it contains, so a later
// access that meets a dropped one still meets the write, which waited for it.
TEST(PlanBuilder, ABoxWriteCoversOnlyTheBoxesItContains) {
  PlanBuilder b("p");
  Slot t =
      b.add_tensor("c", isa::MemSpace::hbm, isa::DType::fp32, {32, 64}, isa::TensorRole::output);
  int q[4];
  Slot s[4];
  for (int i = 0; i < 4; ++i) {
    q[i] = b.add_queue("q" + std::to_string(i), i);
    s[i] = b.add_buffer(isa::MemSpace::sbuf, 0, 32, 256 * i, 256, "s");
  }
  b.emit(q[0], hbm_dma(t, s[0], 0, 32, 0, 16, true));   // columns 0..15
  b.emit(q[1], hbm_dma(t, s[1], 0, 32, 0, 32, true));   // columns 0..31: covers q0's
  b.emit(q[2], hbm_dma(t, s[2], 0, 32, 32, 16, true));  // columns 32..47: meets neither
  b.emit(q[3], hbm_dma(t, s[3], 0, 32, 8, 32, false));  // columns 8..39: q1 (and q0 through it), q2
  isa::Plan p = b.build();
  EXPECT_EQ(waited_by(p, q[1]), (std::vector<std::string>{"done_q0"}));
  EXPECT_TRUE(waited_by(p, q[2]).empty());
  EXPECT_EQ(waited_by(p, q[3]), (std::vector<std::string>{"done_q1", "done_q2"}));
}

TEST(RowBox, RowsAndColumnsOfAnOffChipPattern) {
  isa::AccessPattern h;
  h.space = isa::MemSpace::hbm;
  h.buffer = 0;
  h.dtype = isa::DType::bf16;
  h.partitions = 4;
  h.partition_stride = 100;
  h.offset = 2 * 100 + 30;
  h.num_free = 2;
  h.free[0] = {5, 2};  // 5 x 2-element steps: columns 30..38 (holes at odd ones)
  h.free[1] = {1, 1};
  const RowBox box = RowBox::of(h);
  EXPECT_EQ(box.pitch, 200);
  EXPECT_EQ(box.r_lo, 2);
  EXPECT_EQ(box.r_hi, 6);
  EXPECT_EQ(box.c_lo, 60);
  EXPECT_EQ(box.c_hi, 78);
  h.free[0] = {40, 2};  // columns 30..108 wrap past the row's 100
  EXPECT_EQ(RowBox::of(h).pitch, 0);
  h.free[0] = {5, 2};
  h.partitions = 1;  // one row: no pitch
  EXPECT_EQ(RowBox::of(h).pitch, 0);
  h.partitions = 4;
  h.scalar = 0;  // moved at run time
  EXPECT_EQ(RowBox::of(h).pitch, 0);
  h.scalar = -1;
  h.space = isa::MemSpace::sbuf;  // on chip, partitions order instead
  EXPECT_EQ(RowBox::of(h).pitch, 0);
}

// Merged (or oversized) lists keep one whole-range entry per stream, its latest access, in
// stream order: below 64 streams (a bit mask orders them) and past them (a sort).
TEST(AccessHistory, MergeKeepsTheLatestAccessPerStreamInStreamOrder) {
  for (const int base : {0, 60}) {
    AccessHistory a, b;
    a.writes = {{0, 8, base + 3, 5}, {8, 16, base + 1, 2}, {0, 4, base + 3, 9}};
    b.writes = {{0, 8, base + 1, 7}, {4, 8, base + 10, 1, 32, 64}};
    a.merge(b);
    ASSERT_EQ(a.writes.size(), 3u) << base;
    const int streams[] = {base + 1, base + 3, base + 10};
    const int64_t latest[] = {7, 9, 1};
    for (size_t i = 0; i < 3; ++i) {
      const AccessHistory::Entry& e = a.writes[i];
      EXPECT_EQ(e.stream, streams[i]) << base;
      EXPECT_EQ(e.index, latest[i]) << base;
      EXPECT_EQ(e.lo, 0);
      EXPECT_EQ(e.hi, std::numeric_limits<int64_t>::max());
      EXPECT_EQ(e.p_lo, 0);
      EXPECT_EQ(e.p_hi, std::numeric_limits<int32_t>::max());
    }
    EXPECT_TRUE(a.reads.empty());
  }
}

}  // namespace
}  // namespace wallsim::compiler_stub
