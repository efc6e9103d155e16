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
using isa::MemSpace;
using isa::Opcode;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// matmul:    stationary = src[0] [K x M], moving = src[1] [K x N].
// transpose: [P x F] -> [F x P] through the array: src[0] is the stationary tile (M = F) and an
//            identity of P columns is the moving tile (N = P).
class TensorTiming final : public TimingModel {
 public:
  explicit TensorTiming(const TensorEngineTiming& cfg) : m_cfg(cfg) {
    if (cfg.load_stationary_speedup < 1 || cfg.fp32_slowdown < 1 || cfg.moving_min_cycles < 0 ||
        cfg.fill_cycles < 0 || cfg.drain_cycles < 0 || cfg.load_stationary_min_cycles < 0 ||
        !(cfg.freq_mhz > 0.0)) {
      throw std::invalid_argument("tensor engine timing: a parameter is out of range");
    }
  }

  InstructionTiming time_after(const Instruction& in, int64_t idle_cycles) override {
    const AccessPattern& stationary = in.src[0];
    int64_t n = 0;
    switch (in.op) {
      case Opcode::matmul:
        n = in.src[1].free_elements();
        break;
      case Opcode::transpose:
        n = stationary.partitions;
        break;
      default:
        throw std::invalid_argument("tensor engine timing: " + std::string(isa::info(in.op).name) +
                                    " is not a tensor-engine instruction");
    }
    const int64_t m = stationary.free_elements();
    // fp32 takes fp32_slowdown passes through the array: the load and the multiply both scale.
    const int64_t passes = tensor_passes(tensor_dtype(in), m_cfg);
    const bool new_fold = !(m_loaded && *m_loaded == stationary);

    int64_t load = 0;
    if (new_fold) {
      load =
          std::max(ceil_div(m, m_cfg.load_stationary_speedup), m_cfg.load_stationary_min_cycles) *
          passes;
    }
    int64_t exposed = load;
    if (m_cfg.load_stationary_overlaps) {
      // The next weights load while the previous fold streams: the skew stays in the latency.
      if (idle_cycles == 0 && m_prev_multiply > 0)
        exposed = std::max<int64_t>(0, load - m_prev_multiply);
    } else if (new_fold && m_prev_multiply > 0 && idle_cycles != kIdleUnknown) {
      // Folds serialise (SCALE-Sim's weight-stationary model): the previous fold's results
      // leave the array (fill + drain) before the new weights load; idle time covers part of it.
      const int64_t skew = m_cfg.fill_cycles + m_cfg.drain_cycles;
      exposed += std::max<int64_t>(0, skew - idle_cycles);
    }
    const int64_t multiply = std::max(n, m_cfg.moving_min_cycles) * passes;

    m_loaded = stationary;
    m_prev_multiply = multiply;
    const int64_t occupancy = exposed + multiply;
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

isa::DType tensor_dtype(const isa::Instruction& in) {
  if (in.src[0].dtype == DType::fp32) return DType::fp32;
  if (in.op == Opcode::matmul && in.src[1].dtype == DType::fp32) return DType::fp32;
  return in.src[0].dtype;
}

int64_t tensor_passes(isa::DType dtype, const TensorEngineTiming& cfg) {
  return dtype == DType::fp32 ? cfg.fp32_slowdown : 1;
}

TensorEngineTiming scalesim_like(TensorEngineTiming t, int32_t rows, int32_t cols) {
  t.moving_min_cycles = 1;
  t.load_stationary_speedup = 1;
  t.load_stationary_min_cycles = rows;
  t.load_stationary_overlaps = false;
  t.fill_cycles = rows - 1;
  t.drain_cycles = cols - 1;
  return t;
}

int64_t gemm_span_cycles(TimingModel& model, int64_t m, int64_t k, int64_t n, int32_t rows,
                         int32_t cols, int64_t moving_max) {
  auto tile = [](MemSpace space, int32_t buffer, DType dtype, int64_t partitions, int64_t free) {
    AccessPattern ap;
    ap.space = space;
    ap.buffer = buffer;
    ap.dtype = dtype;
    ap.partitions = static_cast<int32_t>(partitions);
    ap.num_free = 1;
    ap.free[0] = {free, 1};
    return ap;
  };
  model.reset();
  int64_t t = 0, ready = 0;
  bool first = true;
  int32_t fold = 0;
  for (int64_t n0 = 0; n0 < n; n0 += cols) {
    for (int64_t k0 = 0; k0 < k; k0 += rows, ++fold) {
      const int64_t part = std::min<int64_t>(rows, k - k0), width = std::min<int64_t>(cols, n - n0);
      for (int64_t m0 = 0; m0 < m; m0 += moving_max) {
        const int64_t free = std::min(moving_max, m - m0);
        Instruction in;
        in.op = Opcode::matmul;
        in.src[0] = tile(MemSpace::sbuf, fold, DType::bf16, part, width);
        in.src[1] = tile(MemSpace::sbuf, INT32_MAX, DType::bf16, part, free);  // never stationary
        in.dst = tile(MemSpace::psum, 0, DType::fp32, width, free);
        const InstructionTiming it = model.time(in, !first);
        first = false;
        ready = std::max(ready, t + it.latency_cycles);
        t += it.occupancy_cycles;
      }
    }
  }
  return ready;
}

std::unique_ptr<TimingModel> make_tensor_timing(const TensorEngineTiming& cfg) {
  return std::make_unique<TensorTiming>(cfg);
}

}  // namespace wallsim::engines
