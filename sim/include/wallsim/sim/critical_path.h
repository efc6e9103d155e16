// The critical path of a drained launch: which graph node's instruction the launch was waiting
// on at each instant from its start to its end, found from the instructions' recorded times and
// the semaphore waits that held each one back.
#pragma once

#include <systemc>

#include <vector>

#include "wallsim/engines/launch.h"

namespace wallsim::sim {

// Walking back from the launch's end: the instruction whose result ended the launch is on the
// path from its issue to its result (occupancy and latency); its issue was held by the latest of
// (a) the signal that brought a semaphore it waited on to the awaited value (that signaller is
// next, at its signal time), (b) the previous instruction of its stream ending (next, at its
// end), (c) for a stream's first instruction, the engine finishing the launch's previous stream
// on it. A signal held back by in-order retire passes the path to the instruction whose result
// it waited for. The walk stops at the launch's start, so the instants of [start, end] are each
// charged to exactly one instruction: `by_node` and `no_node` sum to end - start exactly.
//
// Ties (two causes at the same instant) go to the first wait in the instruction's list, then to
// the previous instruction of the stream; among signals to one semaphore at the same time, the
// earlier stream in the plan, then the earlier instruction, crosses first; the path ends on the
// lowest-numbered stream among those that finish last. A start no cause explains (the engine
// held by another launch, when launches may overlap) is charged back to the launch's start to the
// instruction that waited. Linear in instructions, apart from sorting a semaphore's signals by
// time when several streams signal it out of order.
struct CriticalPath {
  std::vector<sc_core::sc_time> by_node;  // by Plan::nodes index
  sc_core::sc_time no_node;               // on instructions without provenance (copies)
  size_t instructions = 0;                // instructions on the path
};
CriticalPath critical_path(const engines::Launch& launch);

// The time the DMA transfers of each group of a launch's nodes were in flight, as simulated:
// per group, the union of the [start, end) occupancies of its nodes' DMA instructions over every
// queue (transfers of the group overlapping on several queues, or of several of its nodes,
// count once; the time between them not at all). group[i] is Plan::nodes[i]'s group, or -1.
std::vector<sc_core::sc_time> dma_active_by_group(const engines::Launch& launch,
                                                  const std::vector<int32_t>& group, size_t groups);

}  // namespace wallsim::sim
