// The plan verifier: checks a plan against an ArchSpec before anything runs it.
//
// Rules (each diagnostic names one): decl (declarations fit the chip), engine (opcode on its
// engine), space (engine may touch the memory space), bounds (every access inside its buffer or
// tensor, for the whole declared range of run-time scalars), alignment (compute-engine partition
// start), tile (array and free-size limits, one PSUM bank per matmul), shape (operand shapes
// agree), alu (an ALU op the opcode accepts), dtype, scalar (run-time scalar use), provenance (node
// ids), semaphore (statically certain deadlocks: a wait that no order of execution can satisfy),
// binding (a tensor passed between plans of a sequence has one shape and dtype), collective (a
// collective's operands and communicator; every rank issues the same collectives in order).
#pragma once

#include <string>
#include <vector>

#include "wallsim/isa/arch_spec.h"
#include "wallsim/isa/plan.h"

namespace wallsim::isa {

struct Diagnostic {
  int plan = 0;  // index in the sequence
  std::string plan_name;
  std::string stream;        // "" for plan-level findings
  int64_t instruction = -1;  // index in the stream, or -1
  std::string rule;
  std::string message;
  // "plan 'mm' vector[3]: [shape] ..." on one line.
  std::string to_string() const;
};

std::vector<Diagnostic> verify(const Plan& plan, const ArchSpec& arch, int plan_index = 0);
std::vector<Diagnostic> verify(const PlanSequence& seq, const ArchSpec& arch);

}  // namespace wallsim::isa
