// schedule_plan: streams reordered so ready work issues first, same-byte accesses kept in order.
#include "wallsim/compiler_stub/schedule.h"

#include <gtest/gtest.h>

#include "../support/chip_arch.h"
#include "slot_instructions.h"
#include "wallsim/compiler_stub/plan_builder.h"
#include "wallsim/isa/verifier.h"

namespace wallsim::compiler_stub {
namespace {

using isa::Engine;
using isa::Instruction;
using isa::Opcode;

using test::act;
using test::ap;
using test::copy;

// A long scalar-engine result y = exp(x) and two small buffers z, v after it.
struct LongProducer {
  static constexpr int64_t n = 4096;
  PlanBuilder b{"p"};
  Slot x = b.add_buffer(isa::MemSpace::sbuf, 0, 32, 0, n * 4, "x");
  Slot y = b.add_buffer(isa::MemSpace::sbuf, 0, 32, n * 4, n * 4, "y");
  Slot z = b.add_buffer(isa::MemSpace::sbuf, 0, 32, 2 * n * 4, 64, "z");
  Slot v = b.add_buffer(isa::MemSpace::sbuf, 0, 32, 2 * n * 4 + 64, 64, "v");
  const int sc = b.stream(Engine::scalar), vec = b.stream(Engine::vector);
  LongProducer() { b.emit(sc, act(y, x, n)); }
};

// The vector engine's first instruction needs a long scalar-engine result; its second needs
// nothing: scheduled, the second issues first and the wait moves to the first.
TEST(SchedulePlan, AnEngineWaitingOnAnotherTakesIndependentLaterWorkFirst) {
  LongProducer t;
  PlanBuilder& b = t.b;
  const Slot y = t.y, z = t.z, v = t.v;
  Slot w = b.add_buffer(isa::MemSpace::sbuf, 0, 32, 2 * t.n * 4 + 128, 64, "w");
  const int vec = t.vec;
  b.emit(vec, copy(z, y));  // waits for the scalar engine
  b.emit(vec, copy(w, v));  // independent
  isa::Plan before = b.build();
  ASSERT_EQ(before.streams[1].instructions[0].waits.size(), 1u);

  isa::Plan p = schedule_plan(before, wallsim::test::trn2_arch().costs);
  isa::ArchSpec arch = wallsim::test::trn2_arch();
  EXPECT_TRUE(isa::verify(p, arch).empty());
  const auto& vi = p.streams[1].instructions;
  ASSERT_EQ(vi.size(), 2u);
  EXPECT_EQ(vi[0].dst.buffer, w.index);
  EXPECT_TRUE(vi[0].waits.empty());
  EXPECT_EQ(vi[1].dst.buffer, z.index);
  ASSERT_EQ(vi[1].waits.size(), 1u);
  EXPECT_EQ(vi[1].waits[0].value, 1);
  ASSERT_EQ(p.streams[0].instructions[0].signals.size(), 1u);
}

// Later vector work that writes the bytes the waiting instruction writes (WAW), or reads
// (WAR), or reads what it writes (RAW), stays behind it; so does work on another buffer
// declared over the same bytes (no history inherited: the addresses order it).
TEST(SchedulePlan, AccessesToTheSameBytesKeepTheirOrder) {
  LongProducer t;
  PlanBuilder& b = t.b;
  const Slot y = t.y, z = t.z, v = t.v;
  Slot z_again = b.add_buffer(isa::MemSpace::sbuf, 0, 32, 2 * t.n * 4, 64, "z_again");
  const int vec = t.vec;
  b.emit(vec, copy(z, y));        // waits for the scalar engine
  b.emit(vec, copy(z, v));        // WAW on z
  b.emit(vec, copy(v, z));        // RAW on z
  b.emit(vec, copy(z_again, v));  // z's bytes again
  isa::Plan p = schedule_plan(b.build(), wallsim::test::trn2_arch().costs);
  isa::ArchSpec arch = wallsim::test::trn2_arch();
  EXPECT_TRUE(isa::verify(p, arch).empty());
  const auto& vi = p.streams[1].instructions;
  ASSERT_EQ(vi.size(), 4u);
  EXPECT_EQ(vi[0].src[0].buffer, y.index);
  EXPECT_EQ(vi[1].src[0].buffer, v.index);
  EXPECT_EQ(vi[2].src[0].buffer, z.index);
  EXPECT_EQ(vi[3].dst.buffer, z_again.index);
}

// A plan whose streams cannot all finish (a wait nothing signals) is returned as it is.
TEST(SchedulePlan, ADeadlockedPlanIsReturnedUnchanged) {
  PlanBuilder b("p");
  Slot x = b.add_buffer(isa::MemSpace::sbuf, 0, 32, 0, 64, "x");
  Slot y = b.add_buffer(isa::MemSpace::sbuf, 0, 32, 64, 64, "y");
  const int vec = b.stream(Engine::vector);
  b.emit(vec, copy(y, x));
  isa::Plan p = b.build();
  p.semaphores.push_back("never");
  p.streams[0].instructions[0].waits.push_back({0, 1});
  EXPECT_EQ(schedule_plan(p, wallsim::test::trn2_arch().costs), p);
}

}  // namespace
}  // namespace wallsim::compiler_stub
