// Timing of the weight-stationary tensor engine: load-stationary, multiply-moving, fill, drain.
#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>

#include "wallsim/engines/timing_model.h"

namespace wallsim::engines {

namespace {

using isa::AccessPattern;
using isa::DType;
using isa::Instruction;
using isa::Opcode;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// matmul:    stationary = src[0] [K x M], moving = src[1] [K x N].
// transpose: [P x F] -> [F x P] through the array: src[0] is the stationary tile (M = F) and an
//            identity of P columns is the moving tile (N = P).
class TensorTiming final : public TimingModel {
 public:
  explicit TensorTiming(const TensorEngineTiming& cfg) : m_cfg(cfg) {
    if (cfg.load_stationary_speedup < 1 || cfg.fp32_slowdown < 1 || cfg.moving_min_cycles < 0 ||
        cfg.fill_cycles < 0 || cfg.drain_cycles < 0 || !(cfg.freq_mhz > 0.0)) {
      throw std::invalid_argument("tensor engine timing: a parameter is out of range");
    }
  }

  InstructionTiming time(const Instruction& in, bool back_to_back) override {
    const AccessPattern& stationary = in.src[0];
    int64_t n = 0;
    bool fp32 = stationary.dtype == DType::fp32;
    switch (in.op) {
      case Opcode::matmul:
        n = in.src[1].free_elements();
        fp32 = fp32 || in.src[1].dtype == DType::fp32;
        break;
      case Opcode::transpose:
        n = stationary.partitions;
        break;
      default:
        throw std::invalid_argument("tensor engine timing: " + std::string(isa::info(in.op).name) +
                                    " is not a tensor-engine instruction");
    }
    const int64_t m = stationary.free_elements();

    int64_t load = 0;
    if (!(m_loaded && *m_loaded == stationary)) {
      load = ceil_div(m, m_cfg.load_stationary_speedup);
    }
    int64_t exposed_load = load;
    if (m_cfg.load_stationary_overlaps && back_to_back && m_prev_multiply > 0) {
      exposed_load = std::max<int64_t>(0, load - m_prev_multiply);
    }
    int64_t multiply = std::max(n, m_cfg.moving_min_cycles);
    if (fp32) multiply *= m_cfg.fp32_slowdown;

    m_loaded = stationary;
    m_prev_multiply = multiply;
    const int64_t occupancy = exposed_load + multiply;
    return {occupancy, occupancy + m_cfg.fill_cycles + m_cfg.drain_cycles};
  }

  void reset() override {
    m_loaded.reset();
    m_prev_multiply = 0;
  }

  double freq_mhz() const override { return m_cfg.freq_mhz; }

 private:
  TensorEngineTiming m_cfg;
  std::optional<AccessPattern> m_loaded;  // stationary tile of the previous instruction
  int64_t m_prev_multiply = 0;            // multiply-moving cycles of the previous instruction
};

}  // namespace

std::unique_ptr<TimingModel> make_tensor_timing(const TensorEngineTiming& cfg) {
  return std::make_unique<TensorTiming>(cfg);
}

}  // namespace wallsim::engines
