// Timing of the lane-parallel engines (vector, scalar): fixed overhead plus streaming elements.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "wallsim/engines/timing_model.h"

namespace wallsim::engines {

namespace {

using isa::Engine;
using isa::Instruction;
using isa::Opcode;

// Source operands an opcode reads, from the opcode table (memset and iota read none).
int inputs_of(Opcode op) {
  int n = 0;
  for (int i = 0; i < 3; ++i) n += (isa::info(op).fields & (isa::F_Src0 << i)) ? 1 : 0;
  return n;
}

// Rounds up, except that floating-point noise around a whole number does not add a cycle.
int64_t ceil_cycles(double x) {
  const double nearest = std::nearbyint(x);
  return static_cast<int64_t>(std::fabs(x - nearest) <= 1e-12 * x ? nearest : std::ceil(x));
}

// occupancy = fixed overhead + ceil(max(1, inputs) * free elements / elements_per_cycle
//                                   * (large-stride slowdown if any operand strides widely));
// latency = occupancy + access latency. Partitions run in parallel lanes and cost nothing.
class LaneTiming final : public TimingModel {
 public:
  explicit LaneTiming(const LaneEngineTiming& cfg) : m_cfg(cfg) {
    if (!(cfg.elements_per_cycle > 0.0) || !(cfg.large_stride_slowdown > 0.0) ||
        cfg.fixed_overhead_cycles < 0 || cfg.access_latency_cycles < 0 || !(cfg.freq_mhz > 0.0)) {
      throw std::invalid_argument("lane engine timing: a parameter is out of range");
    }
  }

  InstructionTiming time_after(const Instruction& in, int64_t /*idle_cycles*/) override {
    const isa::OpcodeInfo& info = isa::info(in.op);
    if (info.engine != Engine::vector && info.engine != Engine::scalar) {
      throw std::invalid_argument("lane engine timing: " + std::string(info.name) +
                                  " is not a vector or scalar instruction");
    }
    const int inputs = inputs_of(in.op);
    const int64_t elements =
        in.op == Opcode::tensor_reduce ? in.src[0].free_elements() : in.dst.free_elements();

    bool wide = in.dst.inner_stride_bytes() > m_cfg.large_stride_bytes;
    for (int i = 0; i < 3; ++i) {
      if (info.fields & (isa::F_Src0 << i)) {
        wide = wide || in.src[i].inner_stride_bytes() > m_cfg.large_stride_bytes;
      }
    }
    const double slowdown = wide ? m_cfg.large_stride_slowdown : 1.0;
    const double streaming = static_cast<double>(std::max(1, inputs)) *
                             static_cast<double>(elements) / m_cfg.elements_per_cycle * slowdown;
    const int64_t occupancy = m_cfg.fixed_overhead_cycles + ceil_cycles(streaming);
    return {occupancy, occupancy + m_cfg.access_latency_cycles};
  }

  void reset() override {}

  double freq_mhz() const override { return m_cfg.freq_mhz; }

 private:
  LaneEngineTiming m_cfg;
};

}  // namespace

std::unique_ptr<TimingModel> make_lane_timing(const LaneEngineTiming& cfg) {
  return std::make_unique<LaneTiming>(cfg);
}

}  // namespace wallsim::engines
