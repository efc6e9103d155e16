// Tests of the compute engines' timing models against the published NKI cost model (trn2).
#include "wallsim/engines/timing_model.h"

#include <algorithm>
#include <stdexcept>

#include <gtest/gtest.h>

namespace wallsim::engines {
namespace {

using isa::AccessPattern;
using isa::DType;
using isa::Instruction;
using isa::MemSpace;
using isa::Opcode;

// trn2 values, spelled out so that a change of the struct defaults does not move these tests.
TensorEngineTiming trn2_tensor() {
  TensorEngineTiming t;
  t.freq_mhz = 2400.0;
  t.moving_min_cycles = 64;
  t.fp32_slowdown = 4;
  t.load_stationary_speedup = 4;
  t.load_stationary_overlaps = true;
  t.fill_cycles = 128;
  t.drain_cycles = 128;
  return t;
}

LaneEngineTiming trn2_vector() {
  LaneEngineTiming t;
  t.freq_mhz = 960.0;
  t.elements_per_cycle = 1.0;
  t.fixed_overhead_cycles = 100;
  t.access_latency_cycles = 60;
  t.large_stride_bytes = 16;
  t.large_stride_slowdown = 2.0;
  return t;
}

AccessPattern tile(MemSpace space, int32_t buffer, DType dtype, int32_t partitions, int64_t free,
                   int64_t stride = 1, int64_t offset = 0) {
  AccessPattern ap;
  ap.space = space;
  ap.buffer = buffer;
  ap.dtype = dtype;
  ap.partitions = partitions;
  ap.offset = offset;
  ap.num_free = 1;
  ap.free[0] = {free, stride};
  return ap;
}

// stationary [K x M] in SBUF buffer `weights` at `offset`, moving [K x N], result [M x N] in PSUM.
Instruction matmul(int64_t m, int64_t n, DType dtype = DType::bf16, int32_t weights = 0,
                   int64_t offset = 0) {
  Instruction in;
  in.op = Opcode::matmul;
  in.src[0] = tile(MemSpace::sbuf, weights, dtype, 128, m, 1, offset);
  in.src[1] = tile(MemSpace::sbuf, 9, dtype, 128, n);
  in.dst = tile(MemSpace::psum, 0, DType::fp32, static_cast<int32_t>(m), n);
  return in;
}

TEST(TensorTiming, SameWeightsBackToBackIssueEveryN) {
  auto model = make_tensor_timing(trn2_tensor());
  // The first matmul loads its weights: ceil(128 / 4) = 32 cycles, nothing to hide under.
  EXPECT_EQ(model->time(matmul(128, 512), false).occupancy_cycles, 32 + 512);
  for (int i = 0; i < 4; ++i) {
    InstructionTiming t = model->time(matmul(128, 512), true);
    EXPECT_EQ(t.occupancy_cycles, 512);
    EXPECT_EQ(t.latency_cycles, 512 + 128 + 128);
  }
}

TEST(TensorTiming, SmallMovingTilesIssueEveryMinimum) {
  auto model = make_tensor_timing(trn2_tensor());
  model->time(matmul(128, 32), false);
  EXPECT_EQ(model->time(matmul(128, 32), true).occupancy_cycles, 64);
  EXPECT_EQ(model->time(matmul(128, 32), false).occupancy_cycles, 64);  // weights still loaded
  EXPECT_EQ(model->time(matmul(128, 64), true).occupancy_cycles, 64);
  EXPECT_EQ(model->time(matmul(128, 65), true).occupancy_cycles, 65);
}

TEST(TensorTiming, NewWeightsExposeTheLoadUnlessHiddenUnderAMultiply) {
  auto model = make_tensor_timing(trn2_tensor());
  model->time(matmul(128, 512, DType::bf16, 0), false);
  // New stationary (another buffer), after a stall: the whole load of 32 cycles is exposed.
  EXPECT_EQ(model->time(matmul(128, 512, DType::bf16, 1), false).occupancy_cycles, 32 + 512);
  // New stationary, back to back after a 512-cycle multiply: fully hidden.
  EXPECT_EQ(model->time(matmul(128, 512, DType::bf16, 2), true).occupancy_cycles, 512);
  // A different offset in the same buffer is a different tile too.
  EXPECT_EQ(model->time(matmul(128, 512, DType::bf16, 2, 128), false).occupancy_cycles, 544);
  // M = 64 loads in 16 cycles.
  EXPECT_EQ(model->time(matmul(64, 512, DType::bf16, 3), false).occupancy_cycles, 16 + 512);
}

TEST(TensorTiming, LoadLongerThanThePreviousMultiplyIsPartlyExposed) {
  TensorEngineTiming cfg = trn2_tensor();
  cfg.load_stationary_speedup = 1;  // load of 128 columns: 128 cycles
  auto model = make_tensor_timing(cfg);
  model->time(matmul(128, 32, DType::bf16, 0), false);  // multiply of max(32, 64) = 64 cycles
  EXPECT_EQ(model->time(matmul(128, 32, DType::bf16, 1), true).occupancy_cycles, (128 - 64) + 64);
}

TEST(TensorTiming, NoOverlapWhenDisabled) {
  TensorEngineTiming cfg = trn2_tensor();
  cfg.load_stationary_overlaps = false;
  auto model = make_tensor_timing(cfg);
  model->time(matmul(128, 512, DType::bf16, 0), false);
  // The load is exposed, after the previous fold's fill and drain (folds serialise).
  EXPECT_EQ(model->time(matmul(128, 512, DType::bf16, 1), true).occupancy_cycles,
            128 + 128 + 32 + 512);
  EXPECT_EQ(model->time(matmul(128, 512, DType::bf16, 1), true).occupancy_cycles, 512);
}

TEST(TensorTiming, Fp32IsFourTimesSlower) {
  auto model = make_tensor_timing(trn2_tensor());
  model->time(matmul(128, 512, DType::fp32), false);
  EXPECT_EQ(model->time(matmul(128, 512, DType::fp32), true).occupancy_cycles, 4 * 512);
  model->time(matmul(128, 32, DType::fp32), true);
  EXPECT_EQ(model->time(matmul(128, 32, DType::fp32), true).occupancy_cycles, 4 * 64);
}

TEST(TensorTiming, ResetUnloadsTheWeights) {
  auto model = make_tensor_timing(trn2_tensor());
  model->time(matmul(128, 512), false);
  model->reset();
  EXPECT_EQ(model->time(matmul(128, 512), true).occupancy_cycles, 32 + 512);
}

TEST(TensorTiming, TransposeIsAMatmulWithTheSourceStationary) {
  auto model = make_tensor_timing(trn2_tensor());
  Instruction in;
  in.op = Opcode::transpose;
  in.src[0] = tile(MemSpace::sbuf, 0, DType::bf16, 128, 64);  // [P=128 x F=64]
  in.dst = tile(MemSpace::psum, 0, DType::bf16, 64, 128);
  // load ceil(64 / 4) = 16, identity moving of N = P = 128 columns.
  InstructionTiming t = model->time(in, false);
  EXPECT_EQ(t.occupancy_cycles, 16 + 128);
  EXPECT_EQ(t.latency_cycles, 16 + 128 + 256);
  in.src[0] = tile(MemSpace::sbuf, 0, DType::bf16, 32, 128);  // [P=32 x F=128]: N = max(32, 64)
  EXPECT_EQ(model->time(in, false).occupancy_cycles, 32 + 64);
}

TEST(TensorTiming, LatencyAddsFillAndDrainExactly) {
  TensorEngineTiming cfg = trn2_tensor();
  cfg.fill_cycles = 100;
  cfg.drain_cycles = 7;
  auto model = make_tensor_timing(cfg);
  InstructionTiming t = model->time(matmul(128, 256), false);
  EXPECT_EQ(t.occupancy_cycles, 32 + 256);
  EXPECT_EQ(t.latency_cycles, 32 + 256 + 107);
  EXPECT_DOUBLE_EQ(model->freq_mhz(), 2400.0);
}

TEST(TensorTiming, RejectsOtherEnginesInstructions) {
  auto model = make_tensor_timing(trn2_tensor());
  Instruction in;
  in.op = Opcode::tensor_copy;
  EXPECT_THROW(model->time(in, false), std::invalid_argument);
}

// A vector/scalar instruction over [partitions x n] tiles, innermost stride `stride` elements.
Instruction lane(Opcode op, int64_t n, DType dtype = DType::bf16, int64_t src_stride = 1,
                 int32_t partitions = 128) {
  Instruction in;
  in.op = op;
  in.dst = tile(MemSpace::sbuf, 0, dtype, partitions, n);
  for (int i = 0; i < 3; ++i) {
    in.src[i] = tile(MemSpace::sbuf, 1 + i, dtype, partitions, n, src_stride);
  }
  return in;
}

TEST(LaneTiming, CyclesPerInputElementPlusFixedOverhead) {
  auto model = make_lane_timing(trn2_vector());
  for (int64_t n : {1, 64, 512, 4096}) {
    EXPECT_EQ(model->time(lane(Opcode::tensor_tensor, n), false).occupancy_cycles, 2 * n + 100);
    EXPECT_EQ(model->time(lane(Opcode::tensor_scalar, n), false).occupancy_cycles, n + 100);
    EXPECT_EQ(model->time(lane(Opcode::tensor_copy, n), false).occupancy_cycles, n + 100);
    EXPECT_EQ(model->time(lane(Opcode::select, n), false).occupancy_cycles, 3 * n + 100);
    EXPECT_EQ(model->time(lane(Opcode::activation, n), false).occupancy_cycles, n + 100);
    EXPECT_EQ(model->time(lane(Opcode::activation_reduce, n), false).occupancy_cycles, n + 100);
    // No inputs: still one pass over the destination.
    EXPECT_EQ(model->time(lane(Opcode::memset, n), false).occupancy_cycles, n + 100);
    EXPECT_EQ(model->time(lane(Opcode::iota, n), false).occupancy_cycles, n + 100);
  }
}

TEST(LaneTiming, LatencyAddsAccessLatencyExactly) {
  auto model = make_lane_timing(trn2_vector());
  InstructionTiming t = model->time(lane(Opcode::tensor_tensor, 512), true);
  EXPECT_EQ(t.occupancy_cycles, 2 * 512 + 100);
  EXPECT_EQ(t.latency_cycles, 2 * 512 + 100 + 60);
  EXPECT_DOUBLE_EQ(model->freq_mhz(), 960.0);
}

TEST(LaneTiming, ReduceStreamsTheSource) {
  auto model = make_lane_timing(trn2_vector());
  Instruction in = lane(Opcode::tensor_reduce, 512);
  in.dst = tile(MemSpace::sbuf, 0, DType::fp32, 128, 1);
  EXPECT_EQ(model->time(in, false).occupancy_cycles, 512 + 100);
}

TEST(LaneTiming, LargeInnermostStrideDoublesTheStreamingPart) {
  auto model = make_lane_timing(trn2_vector());
  // fp32, stride 16 elements = 64 bytes > 16 bytes.
  EXPECT_EQ(model->time(lane(Opcode::tensor_tensor, 512, DType::fp32, 16), false).occupancy_cycles,
            2 * (2 * 512) + 100);
  // fp32, stride 4 elements = 16 bytes: not beyond the limit.
  EXPECT_EQ(model->time(lane(Opcode::tensor_tensor, 512, DType::fp32, 4), false).occupancy_cycles,
            2 * 512 + 100);
  // bf16, stride 32 elements = 64 bytes.
  EXPECT_EQ(model->time(lane(Opcode::activation, 100, DType::bf16, 32), false).occupancy_cycles,
            2 * 100 + 100);
  // A strided destination counts too.
  Instruction in = lane(Opcode::tensor_copy, 100, DType::fp32);
  in.dst.free[0].stride = 32;
  EXPECT_EQ(model->time(in, false).occupancy_cycles, 2 * 100 + 100);
  // A broadcast (stride 0) is not a large stride.
  EXPECT_EQ(model->time(lane(Opcode::tensor_scalar, 100, DType::fp32, 0), false).occupancy_cycles,
            100 + 100);
}

TEST(LaneTiming, UnusedOperandsDoNotCount) {
  auto model = make_lane_timing(trn2_vector());
  Instruction in = lane(Opcode::tensor_scalar, 100, DType::fp32);
  in.src[1].free[0].stride = 64;  // not read by tensor_scalar
  EXPECT_EQ(model->time(in, false).occupancy_cycles, 100 + 100);
}

TEST(LaneTiming, PartitionsRunInParallel) {
  auto model = make_lane_timing(trn2_vector());
  EXPECT_EQ(
      model->time(lane(Opcode::tensor_tensor, 256, DType::bf16, 1, 1), false).occupancy_cycles,
      model->time(lane(Opcode::tensor_tensor, 256, DType::bf16, 1, 128), false).occupancy_cycles);
}

TEST(LaneTiming, FractionalThroughputRoundsUp) {
  LaneEngineTiming cfg = trn2_vector();
  cfg.elements_per_cycle = 2.0;
  auto model = make_lane_timing(cfg);
  EXPECT_EQ(model->time(lane(Opcode::activation, 3), false).occupancy_cycles, 2 + 100);
  EXPECT_EQ(model->time(lane(Opcode::tensor_tensor, 3), false).occupancy_cycles, 3 + 100);
  cfg.elements_per_cycle = 0.1;  // 1 / 0.1 is not exact in binary: must still give 10 cycles
  model = make_lane_timing(cfg);
  EXPECT_EQ(model->time(lane(Opcode::activation, 1), false).occupancy_cycles, 10 + 100);
}

TEST(LaneTiming, RejectsTensorAndDmaInstructions) {
  auto model = make_lane_timing(trn2_vector());
  EXPECT_THROW(model->time(lane(Opcode::matmul, 8), false), std::invalid_argument);
  EXPECT_THROW(model->time(lane(Opcode::dma_copy, 8), false), std::invalid_argument);
}

TEST(TimingFactories, RejectOutOfRangeConfigs) {
  TensorEngineTiming t = trn2_tensor();
  t.load_stationary_speedup = 0;
  EXPECT_THROW(make_tensor_timing(t), std::invalid_argument);
  LaneEngineTiming l = trn2_vector();
  l.elements_per_cycle = 0.0;
  EXPECT_THROW(make_lane_timing(l), std::invalid_argument);
}

// SCALE-Sim v2's weight-stationary array: R = C = 128, weights load in R cycles whatever the
// tile width, folds do not overlap, one cycle per streamed row, fill R - 1, drain C - 1.
TensorEngineTiming scalesim_tensor() { return scalesim_like(trn2_tensor(), 128, 128); }

int64_t gemm_span(TimingModel& model, int64_t m, int64_t k, int64_t n) {
  return gemm_span_cycles(model, m, k, n, 128, 128, 512);
}

int64_t scalesim_cycles(int64_t m, int64_t k, int64_t n) {
  const int64_t r = 128, c = 128;
  return ((k + r - 1) / r) * ((n + c - 1) / c) * (2 * r + c + m - 2) - 1;
}

TEST(TensorTiming, NonOverlappedFoldsMatchScaleSimWeightStationaryWithinOnePercent) {
  auto model = make_tensor_timing(scalesim_tensor());
  const int64_t shapes[][3] = {
      {1, 1, 1},       {128, 128, 128}, {127, 129, 1},    {512, 128, 128},    {4096, 128, 128},
      {1, 4096, 4096}, {4096, 4096, 1}, {300, 200, 100},  {1000, 1000, 1000}, {4096, 4096, 4096},
      {64, 256, 384},  {513, 129, 257}, {2048, 64, 2048}, {100, 4000, 30},    {3000, 17, 999},
      {7, 7, 4096},    {4095, 1, 4095}, {256, 1024, 512}, {1536, 768, 3072},  {333, 555, 777},
      {2, 3000, 130},  {129, 129, 129},
  };
  for (const auto& s : shapes) {
    const double ours = double(gemm_span(*model, s[0], s[1], s[2]));
    const double ref = double(scalesim_cycles(s[0], s[1], s[2]));
    EXPECT_NEAR(ours / ref, 1.0, 0.01) << "M=" << s[0] << " K=" << s[1] << " N=" << s[2] << ": "
                                       << ours << " vs SCALE-Sim " << ref;
  }
}

TEST(TensorTiming, NonOverlappedNewWeightsWaitForThePreviousFoldToDrain) {
  TensorEngineTiming cfg = trn2_tensor();
  cfg.load_stationary_overlaps = false;
  auto model = make_tensor_timing(cfg);
  model->time(matmul(128, 512, DType::bf16, 0), false);
  // New weights: fill + drain of the previous fold, then the load, then the multiply.
  EXPECT_EQ(model->time(matmul(128, 512, DType::bf16, 1), true).occupancy_cycles, 256 + 32 + 512);
  // Same weights: streams right after.
  EXPECT_EQ(model->time(matmul(128, 512, DType::bf16, 1), true).occupancy_cycles, 512);
  // Idle cycles cover part of the skew.
  EXPECT_EQ(model->time_after(matmul(128, 512, DType::bf16, 2), 200).occupancy_cycles,
            56 + 32 + 512);
}

TEST(TensorTiming, OverlappedFoldsPayTheSkewOnlyAsLatency) {
  auto model = make_tensor_timing(trn2_tensor());
  model->time(matmul(128, 512, DType::bf16, 0), false);
  const InstructionTiming t = model->time(matmul(128, 512, DType::bf16, 1), true);
  EXPECT_EQ(t.occupancy_cycles, 512);
  EXPECT_EQ(t.latency_cycles, 512 + 256);
}

TEST(TensorTiming, Fp32LoadsScaleToo) {
  auto model = make_tensor_timing(trn2_tensor());
  EXPECT_EQ(model->time(matmul(128, 512, DType::fp32), false).occupancy_cycles, 4 * (32 + 512));
}

}  // namespace
}  // namespace wallsim::engines
