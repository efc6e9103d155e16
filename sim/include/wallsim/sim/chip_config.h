// The chip's configuration: `arch` (what the compiler must know) and `timing` (clocks,
// latencies, bandwidths, overheads), each component's section typed and described.
#pragma once

#include <string>
#include <vector>

#include "wallsim/dma/dma_timing.h"
#include "wallsim/engines/engine_timing.h"
#include "wallsim/isa/arch_spec.h"
#include "wallsim/memory/memory_timing.h"

namespace wallsim::sim {

// What starting a plan costs: its instruction streams are fetched from HBM, semaphores reset,
// and (by default) it starts only after the previous plan has drained.
struct LaunchTiming {
  int64_t bytes_per_instruction = 64;
  int64_t switch_ns = 1000;
  int64_t semaphore_reset_ns = 100;
  bool wait_for_previous = true;
};

struct TimingConfig {
  engines::TensorEngineTiming tensor;
  engines::LaneEngineTiming vector{960.0};
  engines::LaneEngineTiming scalar{1200.0};
  memory::HbmTiming hbm;
  dma::DmaTiming dma;
  dma::HostLinkTiming host_link;
  LaunchTiming launch;
  // Compute engines that share one SBUF access port: their instructions' occupancies serialise.
  std::vector<isa::Engine> shared_sbuf_port;
};

struct ChipConfig {
  // The defaults (trn2's), the compiler's cost hints derived from the default timing.
  ChipConfig();
  std::string name = "trn2";
  isa::ArchSpec arch;  // arch.costs: sim::cost_hints(timing), derived again when a config loads
  TimingConfig timing;
};

template <class V>
void describe(V& v, LaunchTiming& t) {
  v.field("bytes_per_instruction", t.bytes_per_instruction, {1, 1 << 20}, "bytes",
          "encoded instruction size fetched from HBM when a plan is launched");
  v.field("switch_ns", t.switch_ns, {0, 1000000000}, "ns", "fixed cost of starting a plan");
  v.field("semaphore_reset_ns", t.semaphore_reset_ns, {0, 1000000000}, "ns",
          "cost of resetting the plan's semaphores");
  v.field("wait_for_previous", t.wait_for_previous,
          "a plan starts only after the previous plan has drained");
}

template <class V>
void describe(V& v, TimingConfig& t) {
  v.section("tensor", t.tensor, "tensor engine pipeline");
  v.section("vector", t.vector, "vector engine");
  v.section("scalar", t.scalar, "scalar (activation) engine");
  v.section("hbm", t.hbm, "device memory");
  v.section("dma", t.dma, "each DMA engine");
  v.section("host_link", t.host_link, "host<->device link");
  v.section("launch", t.launch, "plan launch");
  v.field("shared_sbuf_port", t.shared_sbuf_port,
          "compute engines sharing one SBUF access port (their instructions serialise)");
}

// Cross-field consistency of the whole chip; throws base::InputError with the JSON path.
void check_consistency(const ChipConfig& chip);

// arch.dma.hardware_transpose and timing.dma.transpose_chunk_bytes are one fact (the DMA engines
// transpose 2-byte elements in hardware) in two keys: the key the config left out is derived
// from the one it gave (a chunk > 0: hardware transpose; none, the default: a chunk of 0). With
// both given, check_consistency refuses them unless they agree.
void resolve_dma_transpose(ChipConfig& chip, bool arch_given, bool timing_given);

// The tensor engine's peak FLOP/s at one pass per matmul (bf16): 2 FLOP per MAC, rows x cols
// MACs per cycle of the tensor clock; a dtype of several passes divides it. The one formula the
// device's stats, the run report's op table, the sweep's table and `config show` use.
double peak_tensor_flops(double rows, double cols, double freq_mhz);
double peak_tensor_flops(const ChipConfig& chip);

// The speeds the compiler's cost model needs (isa::CostHints), taken from the timing section.
isa::CostHints cost_hints(const TimingConfig& t);

}  // namespace wallsim::sim
