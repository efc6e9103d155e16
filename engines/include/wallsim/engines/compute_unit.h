// ComputeUnit: the datapath of a tensor, vector or scalar engine — a timing model for the clock
// cycles and, in functional mode, the instruction's real result.
#pragma once

#include <memory>

#include "wallsim/engines/execution_unit.h"
#include "wallsim/engines/timing_model.h"

namespace wallsim::engines {

// An access port shared by several engines: an instruction issues when the port is free and
// holds it for its occupancy (arrival order decides between engines).
struct SharedPort {
  sc_core::sc_time free_at;
};

class ComputeUnit : public ExecutionUnit {
 public:
  // `port` (owned elsewhere) is null when the engine has its own SBUF port.
  explicit ComputeUnit(std::unique_ptr<TimingModel> model, SharedPort* port = nullptr);
  sc_core::sc_time run(const isa::Instruction& in, Launch& launch, bool back_to_back) override;
  void begin_stream(const isa::Stream&) override {
    m_model->reset();
    m_have_prev = false;
  }
  int64_t clock_period_fs() const override { return m_period_fs; }

 private:
  std::unique_ptr<TimingModel> m_model;
  SharedPort* m_port;
  int64_t m_period_fs;
  int64_t m_carry_fs = 0;       // of the clock grid, below the 1 ps time resolution
  bool m_have_prev = false;     // an instruction of this stream has run
  sc_core::sc_time m_last_end;  // when its occupancy ended (for the idle cycles since)
};

}  // namespace wallsim::engines
