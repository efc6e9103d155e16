// SPMD plans that run one collective: what `wallsim collectives` and the tests launch on every
// rank (plain C++).
#pragma once

#include <cstdint>
#include <string>

#include "wallsim/collectives/schedule.h"
#include "wallsim/isa/plan.h"

namespace wallsim::collectives {

// A plan of one DMA queue that runs `op` once on communicator "world" of `ranks` ranks, with a
// size of `count` elements of `dtype` as nccl-tests counts it (see choose_algorithm), from HBM
// tensor "src" to HBM tensor "dst" (one row each), reducing with add. `peer` is the permute
// offset; send_recv gives the sender's plan (peer = the receiver) when `receiver` is false and
// the receiver's (peer = the sender) when true. `count` must divide by `ranks` where the op
// splits the data.
isa::Plan collective_plan(CollectiveOp op, int ranks, int64_t count, isa::DType dtype, int peer = 1,
                          bool receiver = false);

}  // namespace wallsim::collectives
