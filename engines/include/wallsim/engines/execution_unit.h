// ExecutionUnit: what a stream processor issues instructions to — a compute engine's datapath or
// a DMA queue's engine. Timing and function live behind it; issue order and sync do not.
#pragma once

#include <systemc>

#include <string>

#include "wallsim/engines/launch.h"
#include "wallsim/isa/instruction.h"
#include "wallsim/isa/plan.h"

namespace wallsim::engines {

class ExecutionUnit {
 public:
  virtual ~ExecutionUnit() = default;
  // Runs `in` from the calling SC_THREAD. Returns when the unit may issue its next instruction
  // (it has waited for the instruction's occupancy); the returned time is how much later the
  // result is ready, when its semaphores fire. `back_to_back` says the previous instruction's
  // occupancy ended exactly now (no stall). Functional units also compute the result, reading
  // and writing `launch.memory`; errors throw memory::MemoryError.
  virtual sc_core::sc_time run(const isa::Instruction& in, Launch& launch, bool back_to_back) = 0;
  // A stream starts (of a new plan): forget per-plan state such as loaded weights.
  virtual void begin_stream(const isa::Stream& stream) {}
  // The clock whose cycles this unit's stats count, or 0 for units without one (DMA).
  virtual int64_t clock_period_fs() const = 0;
  // Bytes the instruction moves (DMA), for stats and provenance.
  virtual int64_t bytes_moved(const isa::Instruction& in) const { return 0; }
};

// The clock period in whole femtoseconds. Simulated time has a resolution of 1 ps (sim/exec.h),
// so a duration of n cycles is n x period rounded to the nearest picosecond: the clock keeps
// its exact rate on average and cycle counts read back from durations are exact.
int64_t period_fs(double freq_mhz);
int64_t time_to_cycles(sc_core::sc_time t, int64_t period_fs);

}  // namespace wallsim::engines
