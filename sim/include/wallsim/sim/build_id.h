// Which simulator this is: 16 hex digits of a hash over the sources of the timing model (sim,
// engines, dma, memory, collectives), generated at build time (cmake/BuildId.cmake). What is
// cached across runs from simulated times (the tuning cache: runtime/schedule_tuner.h) is keyed
// by it, so a change to the timing code, not only to the config's timing values, invalidates it.
#pragma once

namespace wallsim::sim {

const char* build_id();

}  // namespace wallsim::sim
