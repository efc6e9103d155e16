// Timing parameters of the compute engines, read from a config's `timing.tensor`,
// `timing.vector` and `timing.scalar` sections. configs/README.md cites every default;
// docs/TIMING.md gives the formulas that use them.
#pragma once

#include <cstdint>

#include "wallsim/base/params.h"

namespace wallsim::engines {

// Weight-stationary systolic array. A matmul is load-stationary (skipped when the same
// stationary tile is already loaded) then multiply-moving; fill and drain add latency, and
// also hold the array between folds when loads do not overlap (docs/TIMING.md §2).
struct TensorEngineTiming {
  double freq_mhz = 2400.0;
  int64_t moving_min_cycles = 64;          // multiply-moving occupies max(N, this) cycles
  int64_t fp32_slowdown = 4;               // fp32 operands take this many passes
  int64_t load_stationary_speedup = 4;     // load-stationary of M columns: ceil(M / this) cycles
  int64_t load_stationary_min_cycles = 0;  // ... but at least this many (SCALE-Sim: R)
  bool load_stationary_overlaps = true;    // loading the next weights hides under a multiply
  int64_t fill_cycles = 128;               // operand skew through the rows (latency)
  int64_t drain_cycles = 128;              // results leaving the columns (latency)
};

// Lane-parallel engines (vector, scalar): one element per partition per cycle per input.
struct LaneEngineTiming {
  double freq_mhz = 960.0;
  double elements_per_cycle = 1.0;      // per partition, per input operand
  int64_t fixed_overhead_cycles = 100;  // per instruction, visible on small tiles
  int64_t access_latency_cycles = 60;   // SBUF/PSUM access (latency)
  int64_t large_stride_bytes = 16;      // innermost strides beyond this ...
  double large_stride_slowdown = 2.0;   // ... cost this factor in bandwidth
};

template <class V>
void describe(V& v, TensorEngineTiming& t) {
  v.field("freq_mhz", t.freq_mhz, {1.0, 100000.0}, "MHz", "tensor engine clock");
  v.field("moving_min_cycles", t.moving_min_cycles, {1, 1 << 20}, "cycles",
          "multiply-moving occupies max(N, this) cycles for a moving tile of free size N");
  v.field("fp32_slowdown", t.fp32_slowdown, {1, 64}, "x",
          "fp32 matmuls take this many times the bf16 cycles (load and multiply)");
  v.field("load_stationary_speedup", t.load_stationary_speedup, {1, 1024}, "x",
          "load-stationary of an M-column tile takes ceil(M / this) cycles");
  v.field("load_stationary_min_cycles", t.load_stationary_min_cycles, {0, 1 << 20}, "cycles",
          "load-stationary takes at least this many cycles (SCALE-Sim: R, whatever the width)");
  v.field("load_stationary_overlaps", t.load_stationary_overlaps,
          "true: the next fold's weights load under the current multiply, fill and drain are "
          "latency; false: folds serialise, each paying load, stream, fill and drain");
  v.field("fill_cycles", t.fill_cycles, {0, 1 << 20}, "cycles",
          "pipeline fill: added to a matmul's latency, not its occupancy");
  v.field("drain_cycles", t.drain_cycles, {0, 1 << 20}, "cycles",
          "pipeline drain: added to a matmul's latency, not its occupancy");
}

template <class V>
void describe(V& v, LaneEngineTiming& t) {
  v.field("freq_mhz", t.freq_mhz, {1.0, 100000.0}, "MHz", "engine clock");
  v.field("elements_per_cycle", t.elements_per_cycle, {0.001, 1024.0}, "elements/cycle",
          "elements per partition per cycle for each input operand");
  v.field("fixed_overhead_cycles", t.fixed_overhead_cycles, {0, 1 << 20}, "cycles",
          "fixed cost per instruction");
  v.field("access_latency_cycles", t.access_latency_cycles, {0, 1 << 20}, "cycles",
          "SBUF/PSUM access latency, added to the instruction's latency");
  v.field("large_stride_bytes", t.large_stride_bytes, {1, 1 << 20}, "bytes",
          "innermost strides larger than this are slow");
  v.field("large_stride_slowdown", t.large_stride_slowdown, {1.0, 64.0}, "x",
          "throughput divisor for slow (large-stride) accesses");
}

}  // namespace wallsim::engines
