// Hand-built instructions over PlanBuilder slots, for tests of the builder's and the list
// schedule's sync: a [32 partitions x cols] access of a slot, a vector-engine copy and a
// scalar-engine exp between two slots.
#pragma once

#include <cstdint>

#include "wallsim/compiler_stub/plan_builder.h"
#include "wallsim/isa/plan.h"

namespace wallsim::compiler_stub::test {

inline isa::AccessPattern ap(Slot s, int64_t cols = 16) {
  isa::AccessPattern a;
  a.space = s.space;
  a.buffer = s.index;
  a.partitions = 32;
  a.num_free = 1;
  a.free[0] = {cols, 1};
  return a;
}

inline isa::Instruction copy(Slot dst, Slot src, int64_t cols = 16) {
  isa::Instruction in;
  in.op = isa::Opcode::tensor_copy;
  in.dst = ap(dst, cols);
  in.src[0] = ap(src, cols);
  return in;
}

inline isa::Instruction act(Slot dst, Slot src, int64_t cols = 16) {
  isa::Instruction in;
  in.op = isa::Opcode::activation;
  in.act = isa::ActFn::exp;
  in.dst = ap(dst, cols);
  in.src[0] = ap(src, cols);
  return in;
}

}  // namespace wallsim::compiler_stub::test
