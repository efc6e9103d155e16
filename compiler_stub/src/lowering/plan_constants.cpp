// Plan constants: buffers whose contents depend on no value (identities, ones rows, 0/1
// masks), built once per plan on first use and kept until the plan ends, or until SBUF is
// too full for an op that does not use them. Built per op, they
// ran at the start of every op that needs them, in order on the vector engine behind the
// previous op's work: on a decode token's chain, 24 layernorms rebuilt the same identity and
// ones row. The bytes are few (a row or a tile's width per partition).
#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub::lowering {

std::optional<Slot> LoweringContext::plan_constant(const std::string& key, int64_t bytes,
                                                   const std::function<bool(Slot)>& build) {
  auto it = m_constants.find(key);
  if (it != m_constants.end()) {
    it->second.user = current_node();
    return it->second.slot;
  }
  auto s = sbuf_alloc(bytes, key);
  if (!s) return std::nullopt;
  if (!build(*s)) {
    release(*s);
    return std::nullopt;
  }
  m_constants[key] = {*s, current_node()};
  return s;
}

std::optional<Slot> LoweringContext::identity(int32_t parts, DType dt) {
  const std::string key = "identity " + std::to_string(parts) + " " + std::string(isa::name_of(dt));
  return plan_constant(key, SbufAllocator::aligned(parts * isa::dtype_bytes(dt)), [&](Slot s) {
    auto diff = sbuf_alloc(SbufAllocator::aligned(parts * 4), "iota");
    if (!diff) return false;
    const AccessPattern dap = sbuf_ap(*diff, DType::fp32, parts, 0, parts);
    Instruction in = vec(Opcode::iota, dap);
    in.partition_step = 1;  // p - i
    in.step = -1;
    emit(stream(Engine::vector), in);
    tensor_scalar(AluOp::eq, sbuf_ap(s, dt, parts, 0, parts), dap, 0.0);
    release(*diff);
    return true;
  });
}

// When SBUF is full even with every value spilled: the constants the current op has not
// asked for are freed (a later op rebuilds them), so they never make a plan not fit.
bool LoweringContext::drop_constants() { return drop_unasked(m_constants); }

}  // namespace wallsim::compiler_stub::lowering
