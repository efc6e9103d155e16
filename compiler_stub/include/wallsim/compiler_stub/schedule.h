// List scheduling across ops: reorders a built plan's streams so an engine whose next
// instruction waits (on another engine, at an op boundary) issues independent later work first.
#pragma once

#include "wallsim/isa/arch_spec.h"
#include "wallsim/isa/plan.h"

namespace wallsim::compiler_stub {

// Returns `plan` with every stream (engine or DMA queue) reordered and its semaphores derived
// again. Two instructions touching the same bytes of SBUF, PSUM or a tensor (one of them
// writing) keep their order; so do the instructions of one stream that depend on each other.
// Everything else on a stream may move: when an engine is free, it takes, of the instructions
// whose inputs are ready by then (by `costs`' estimates of every instruction's time), the one
// with the longest estimated chain of dependants after it (then the one emitted first); when
// none is ready, the one ready soonest. Instructions, engines and queues
// are unchanged, only their order and the semaphores. A plan whose streams cannot be put in
// one order (a deadlock the verifier reports) is returned as it is.
isa::Plan schedule_plan(isa::Plan plan, const isa::CostHints& costs);

}  // namespace wallsim::compiler_stub
