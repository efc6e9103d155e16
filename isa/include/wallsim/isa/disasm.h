// The disassembler: one assembler-like line per instruction, for people and for tests.
#pragma once

#include <string>

#include "wallsim/isa/plan.h"

namespace wallsim::isa {

// e.g. "x_sb<bf16>[p0:128][+0; 512*1]" on chip, "x<bf16>[r128*512][+0+pos*512; 512*1]" off chip.
std::string format_access(const AccessPattern& ap, const Plan& plan);
// e.g. "matmul dst=... stationary=... moving=... start stop wait(a>=1) signal(b+=1) @node 3"
std::string disassemble(const Instruction& in, const Plan& plan);
// A header per plan (scalars, semaphores, tensors, buffers), then "engine[i]  instruction" lines.
std::string disassemble(const PlanSequence& seq);

}  // namespace wallsim::isa
