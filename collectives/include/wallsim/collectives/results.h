// What a collective leaves in each rank's destination, from every rank's source (plain C++):
// the functional meaning of the collective instructions, reductions accumulated in fp32 in rank
// order.
#pragma once

#include <vector>

#include "wallsim/collectives/schedule.h"
#include "wallsim/isa/instruction.h"

namespace wallsim::collectives {

// inputs[r] is rank r's source, flattened in its access pattern's order; returns each rank's
// destination the same way. `alu` is the reduction (add, max, min), `peer` the permute offset.
// For send_recv, inputs are {sender's source} and the result {receiver's destination}.
std::vector<std::vector<float>> collective_results(CollectiveOp op, isa::AluOp alu, int peer,
                                                   const std::vector<std::vector<float>>& inputs);

}  // namespace wallsim::collectives
