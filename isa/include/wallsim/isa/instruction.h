// Instructions: one struct for every opcode, described by the table in opcodes.def.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "wallsim/isa/access_pattern.h"
#include "wallsim/isa/types.h"

namespace wallsim::isa {

enum class Opcode : uint8_t {
#define WALLSIM_OPCODE(name, engine, fields, s0, s1, s2, summary) name,
#include "wallsim/isa/opcodes.def"
#undef WALLSIM_OPCODE
};

// Which Instruction fields an opcode uses.
enum OpField : uint32_t {
  F_Dst = 1u << 0,
  F_Src0 = 1u << 1,
  F_Src1 = 1u << 2,
  F_Src2 = 1u << 3,
  F_Accum = 1u << 4,  // second destination: per-partition reduction of dst
  F_Alu = 1u << 5,
  F_Act = 1u << 6,     // act, scale, bias
  F_Scalar = 1u << 7,  // scalar: immediate or run-time scalar
  F_Reverse = 1u << 8,
  F_Value = 1u << 9,
  F_Iota = 1u << 10,         // value, partition_step, step
  F_MatmulFlags = 1u << 11,  // start, stop
  F_Comm = 1u << 12,         // comm: a communicator of the plan (a collective)
  F_Peer = 1u << 13,         // peer: a rank (send, recv) or a rank offset (permute)
};

enum class AluOp : uint8_t { add, sub, mul, div, max, min, eq, ne, lt, le, gt, ge };
enum class ActFn : uint8_t {
  identity,
  relu,
  gelu,
  silu,
  exp,
  log,
  tanh,
  sigmoid,
  rsqrt,
  sqrt,
  square,
  reciprocal,
  abs
};
inline constexpr int kNumAluOps = 12;
inline constexpr int kNumActFns = 13;

std::string_view name_of(AluOp op);
std::string_view name_of(ActFn fn);
std::optional<AluOp> parse_alu_op(std::string_view s);
std::optional<ActFn> parse_act_fn(std::string_view s);
bool is_comparison(AluOp op);
bool is_reduction(AluOp op);  // add, max, min

struct OpcodeInfo {
  std::string_view name;
  Engine engine;
  uint32_t fields;
  std::array<std::string_view, 3> src_roles;
  std::string_view summary;
};
const OpcodeInfo& info(Opcode op);
std::optional<Opcode> parse_opcode(std::string_view s);
inline constexpr int kNumOpcodes = 0
#define WALLSIM_OPCODE(name, engine, fields, s0, s1, s2, summary) +1
#include "wallsim/isa/opcodes.def"
#undef WALLSIM_OPCODE
    ;

// An immediate, or a run-time scalar bound at plan launch.
struct ScalarOperand {
  int32_t scalar = -1;  // index into Plan::scalars, or -1 for the immediate
  double imm = 0.0;
  bool operator==(const ScalarOperand& o) const { return scalar == o.scalar && imm == o.imm; }
};

struct SemWait {
  int32_t sem;
  int64_t value;  // issue once the semaphore is >= value
  bool operator==(const SemWait& o) const { return sem == o.sem && value == o.value; }
};
struct SemSignal {
  int32_t sem;
  int64_t add;  // added when the instruction's result is ready
  bool operator==(const SemSignal& o) const { return sem == o.sem && add == o.add; }
};

// Members are ordered by size so that the struct has no padding holes.
struct Instruction {
  AccessPattern dst;
  std::array<AccessPattern, 3> src;
  AccessPattern accum;
  double scale = 1.0;
  double bias = 0.0;
  double value = 0.0;
  double partition_step = 0.0;
  double step = 0.0;
  ScalarOperand scalar;
  std::vector<SemWait> waits;
  std::vector<SemSignal> signals;
  int32_t node = -1;  // provenance: id of the graph node this implements, or -1
  int16_t comm = -1;  // collectives: index into Plan::comms (no padding added: 16-bit)
  int16_t peer = 0;   // send, recv: the peer's rank; permute: the offset every rank sends to
  Opcode op = Opcode::memset;
  AluOp alu = AluOp::add;
  ActFn act = ActFn::identity;
  bool reverse = false;
  bool start = true;  // matmul: overwrite the accumulator instead of adding to it
  bool stop = true;   // matmul: last of an accumulation group; the result is final

  bool uses(OpField f) const { return (info(op).fields & f) != 0; }
  bool operator==(const Instruction& o) const;
  bool operator!=(const Instruction& o) const { return !(*this == o); }
};

// A collective (all_reduce, ..., send, recv): run over a communicator, not by one core alone.
inline bool is_collective(Opcode op) { return (info(op).fields & F_Comm) != 0; }

// Multiply-accumulates a matmul performs: K (stationary partitions) x M (stationary free) x N
// (moving free). 0 for every other opcode, transposes included (they move data, not math).
inline int64_t macs(const Instruction& in) {
  if (in.op != Opcode::matmul) return 0;
  return int64_t{in.src[0].partitions} * in.src[0].free_elements() * in.src[1].free_elements();
}

}  // namespace wallsim::isa
