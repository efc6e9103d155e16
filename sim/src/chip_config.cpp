// Consistency checks across the chip's config sections.
#include "wallsim/sim/chip_config.h"

#include <stdexcept>

#include "wallsim/memory/bandwidth_share.h"

namespace wallsim::sim {

void check_consistency(const ChipConfig& chip) {
  if (chip.name.empty()) throw base::InputError("name", "expected a non-empty chip name");
  isa::check_consistency(chip.arch, "arch");
  for (isa::Engine e : chip.timing.shared_sbuf_port) {
    if (e == isa::Engine::dma) {
      throw base::InputError("timing.shared_sbuf_port", "lists compute engines only, not dma");
    }
  }
  if (chip.arch.dma.hardware_transpose && chip.timing.dma.transpose_chunk_bytes == 0) {
    throw base::InputError("arch.dma.hardware_transpose",
                           "is true but timing.dma.transpose_chunk_bytes is 0: a hardware DMA "
                           "transpose needs its chunk size");
  }
  if (!chip.arch.dma.hardware_transpose && chip.timing.dma.transpose_chunk_bytes > 0) {
    throw base::InputError("arch.dma.hardware_transpose",
                           "is false but timing.dma.transpose_chunk_bytes is " +
                               std::to_string(chip.timing.dma.transpose_chunk_bytes) +
                               ": both say whether the DMA engines transpose in hardware; set "
                               "one of them, or both alike");
  }
  try {
    memory::make_bandwidth_share(chip.timing.hbm.sharing);
  } catch (const std::invalid_argument& e) {
    throw base::InputError("timing.hbm.sharing", e.what());
  }
}

void resolve_dma_transpose(ChipConfig& chip, bool arch_given, bool timing_given) {
  if (timing_given && !arch_given) {
    chip.arch.dma.hardware_transpose = chip.timing.dma.transpose_chunk_bytes > 0;
  } else if (!timing_given && !chip.arch.dma.hardware_transpose) {
    chip.timing.dma.transpose_chunk_bytes = 0;  // no hardware transpose (the default) has no chunk
  }
}

double peak_tensor_flops(double rows, double cols, double freq_mhz) {
  return 2.0 * rows * cols * freq_mhz * 1e6;
}

double peak_tensor_flops(const ChipConfig& chip) {
  return peak_tensor_flops(chip.arch.tensor.rows, chip.arch.tensor.cols,
                           chip.timing.tensor.freq_mhz);
}

ChipConfig::ChipConfig() { arch.costs = cost_hints(timing); }

isa::CostHints cost_hints(const TimingConfig& t) {
  isa::CostHints h;
  h.tensor_freq_mhz = t.tensor.freq_mhz;
  h.moving_min_cycles = t.tensor.moving_min_cycles;
  h.vector_elements_per_ns = t.vector.freq_mhz * t.vector.elements_per_cycle / 1000.0;
  h.scalar_elements_per_ns = t.scalar.freq_mhz * t.scalar.elements_per_cycle / 1000.0;
  h.vector_fixed_ns =
      static_cast<int64_t>(double(t.vector.fixed_overhead_cycles) * 1000.0 / t.vector.freq_mhz);
  h.dma_gb_per_s = t.dma.bandwidth_gb_per_s;
  h.dma_chunk_overhead_bytes = t.dma.chunk_overhead_bytes;
  h.dma_transpose_chunk_bytes = t.dma.transpose_chunk_bytes;
  h.tensor_fp32_passes = t.tensor.fp32_slowdown;
  h.tensor_latency_cycles = t.tensor.fill_cycles + t.tensor.drain_cycles;
  h.lane_access_ns =
      static_cast<int64_t>(double(t.vector.access_latency_cycles) * 1000.0 / t.vector.freq_mhz);
  h.hbm_gb_per_s = t.hbm.bandwidth_gb_per_s;
  h.hbm_latency_ns = t.hbm.latency_ns;
  h.dma_issue_ns = t.dma.descriptor_issue_ns;
  h.dma_issue_overlaps = t.dma.issue_overlaps_transfer;
  h.launch_ns = t.launch.switch_ns + t.launch.semaphore_reset_ns;
  return h;
}

}  // namespace wallsim::sim
