// The opcode table and the names of ALU operations and activation functions.
#include "wallsim/isa/instruction.h"

namespace wallsim::isa {
namespace {

// The short field names used by the table's `fields` column.
constexpr uint32_t Dst = F_Dst, Src0 = F_Src0, Src1 = F_Src1, Src2 = F_Src2, Accum = F_Accum,
                   Alu = F_Alu, Act = F_Act, Scalar = F_Scalar, Reverse = F_Reverse,
                   Value = F_Value, Iota = F_Iota, MatmulFlags = F_MatmulFlags, Comm = F_Comm,
                   Peer = F_Peer;

constexpr std::array<OpcodeInfo, kNumOpcodes> kOpcodes = {{
#define WALLSIM_OPCODE(name, engine, fields, s0, s1, s2, summary) \
  {#name, Engine::engine, static_cast<uint32_t>(fields), {s0, s1, s2}, summary},
#include "wallsim/isa/opcodes.def"
#undef WALLSIM_OPCODE
}};

constexpr std::array<std::string_view, kNumAluOps> kAluNames = {
    "add", "sub", "mul", "div", "max", "min", "eq", "ne", "lt", "le", "gt", "ge"};
constexpr std::array<std::string_view, kNumActFns> kActNames = {
    "identity", "relu",  "gelu", "silu",   "exp",        "log", "tanh",
    "sigmoid",  "rsqrt", "sqrt", "square", "reciprocal", "abs"};

template <class E, size_t N>
std::optional<E> find(const std::array<std::string_view, N>& names, std::string_view s) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == s) return static_cast<E>(i);
  }
  return std::nullopt;
}

}  // namespace

const OpcodeInfo& info(Opcode op) { return kOpcodes[static_cast<size_t>(op)]; }

std::optional<Opcode> parse_opcode(std::string_view s) {
  for (size_t i = 0; i < kOpcodes.size(); ++i) {
    if (kOpcodes[i].name == s) return static_cast<Opcode>(i);
  }
  return std::nullopt;
}

std::string_view name_of(AluOp op) { return kAluNames[static_cast<size_t>(op)]; }
std::string_view name_of(ActFn fn) { return kActNames[static_cast<size_t>(fn)]; }
std::optional<AluOp> parse_alu_op(std::string_view s) { return find<AluOp>(kAluNames, s); }
std::optional<ActFn> parse_act_fn(std::string_view s) { return find<ActFn>(kActNames, s); }

bool is_comparison(AluOp op) { return op >= AluOp::eq; }
bool is_reduction(AluOp op) { return op == AluOp::add || op == AluOp::max || op == AluOp::min; }

bool Instruction::operator==(const Instruction& o) const {
  return op == o.op && dst == o.dst && src == o.src && accum == o.accum && alu == o.alu &&
         act == o.act && scale == o.scale && bias == o.bias && scalar == o.scalar &&
         reverse == o.reverse && value == o.value && partition_step == o.partition_step &&
         step == o.step && start == o.start && stop == o.stop && waits == o.waits &&
         signals == o.signals && node == o.node && comm == o.comm && peer == o.peer;
}

}  // namespace wallsim::isa
