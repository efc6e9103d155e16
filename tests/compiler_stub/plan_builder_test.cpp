// PlanBuilder: semaphores come from cross-engine dependencies only, counted in order.
#include "wallsim/compiler_stub/plan_builder.h"

#include <gtest/gtest.h>

#include <limits>

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
