// Per-instruction timing of the compute engines: occupancy and latency in engine clock cycles.
#pragma once

#include <cstdint>
#include <memory>

#include "wallsim/engines/engine_timing.h"
#include "wallsim/isa/instruction.h"

namespace wallsim::engines {

// Both figures count the engine's own clock cycles from the instruction's issue. `occupancy`:
// the engine may issue its next instruction that many cycles later. `latency` (>= occupancy):
// the result is in memory and the instruction's semaphore signals fire that many cycles later.
struct InstructionTiming {
  int64_t occupancy_cycles;
  int64_t latency_cycles;
};

// Contract: one model per engine, called in that engine's issue order. A model is stateful (the
// tensor engine remembers which stationary tile is loaded and how long the last multiply ran),
// so it must not be shared between engines; not thread-safe. Timing depends only on the
// instruction's shapes, dtypes and strides, never on data. An instruction the engine does not
// execute throws std::invalid_argument (a caller bug: the verifier assigns engines).
class TimingModel {
 public:
  virtual ~TimingModel() = default;
  // The engine was idle `idle_cycles` cycles between the end of the previous instruction's
  // occupancy and this issue: 0 means back to back (no stall); kIdleUnknown means no previous
  // instruction or a stall of unknown length (everything pending has drained).
  virtual InstructionTiming time_after(const isa::Instruction& in, int64_t idle_cycles) = 0;
  // `back_to_back` is true when this instruction issues the same cycle the previous one's
  // occupancy ended; false stands for a long stall.
  InstructionTiming time(const isa::Instruction& in, bool back_to_back) {
    return time_after(in, back_to_back ? 0 : kIdleUnknown);
  }
  static constexpr int64_t kIdleUnknown = INT64_MAX;
  // A new plan starts: nothing is loaded, there is no previous instruction.
  virtual void reset() = 0;
  virtual double freq_mhz() const = 0;
};

// The dtype a tensor-engine instruction runs at: fp32 when either operand is fp32 (the array
// makes fp32_slowdown passes), else the stationary operand's.
isa::DType tensor_dtype(const isa::Instruction& in);
// Passes through the array for instructions of that dtype (fp32: fp32_slowdown, else 1).
int64_t tensor_passes(isa::DType dtype, const TensorEngineTiming& cfg);

// `base` configured like SCALE-Sim v2's weight-stationary array of rows x cols: weights load in
// `rows` cycles whatever the tile width, folds do not overlap, one cycle per streamed row,
// fill rows - 1, drain cols - 1 (docs/TIMING.md §2).
TensorEngineTiming scalesim_like(TensorEngineTiming base, int32_t rows, int32_t cols);

// Cycles from the first issue to the last result of a GEMM out[N x M] = W[K x N]^T . X[K x M]
// issued back to back on `model` (reset first): the K x N operand stationary in folds of at
// most rows x cols, M streamed as the moving free dimension in tiles of at most `moving_max`,
// bf16, operands already on chip. How SCALE-Sim's weight-stationary count is checked
// (docs/TIMING.md §2).
int64_t gemm_span_cycles(TimingModel& model, int64_t m, int64_t k, int64_t n, int32_t rows,
                         int32_t cols, int64_t moving_max);

// Weight-stationary systolic array: matmul and transpose.
std::unique_ptr<TimingModel> make_tensor_timing(const TensorEngineTiming& cfg);
// Lane-parallel engines (vector and scalar): everything they execute.
std::unique_ptr<TimingModel> make_lane_timing(const LaneEngineTiming& cfg);

}  // namespace wallsim::engines
