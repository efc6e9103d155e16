// Functional semantics of the compute instructions (tensor, vector, scalar engines): real
// values on the backing stores, fp32 arithmetic, results converted to the destination dtype.
#pragma once

#include "wallsim/isa/instruction.h"
#include "wallsim/memory/tile_io.h"

namespace wallsim::engines {

// Computes `in` on `mem`. Throws memory::MemoryError for out-of-bounds accesses.
void execute_compute(const isa::Instruction& in, const memory::MemoryMap& mem);

// The activation functions, shared with reference evaluators so both agree exactly.
float apply_activation(isa::ActFn fn, float x);
float apply_alu(isa::AluOp op, float a, float b);

}  // namespace wallsim::engines
