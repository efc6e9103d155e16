// ArchSpec: what a compiler must know about the chip — geometry, tile limits, alignment and
// which engine may touch which memory space. Read from a config's `arch` section.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wallsim/base/params.h"
#include "wallsim/isa/types.h"

namespace wallsim::isa {

// Defaults describe one NeuronCore-v3 (Trainium2) core; configs/README.md cites each figure.
struct SbufSpec {
  int32_t partitions = 128;
  int64_t bytes_per_partition = 224 * 1024;
};

struct PsumSpec {
  int32_t partitions = 128;
  int64_t bytes_per_partition = 16 * 1024;
  int64_t bank_bytes = 2 * 1024;  // one bank holds one matmul's fp32 output row
};

struct TensorArraySpec {
  int32_t rows = 128;             // contraction (K) partitions of the stationary and moving tiles
  int32_t cols = 128;             // stationary free size M = output partitions
  int32_t moving_free_max = 512;  // moving free size N
};

struct LaneEngineSpec {
  int64_t free_max = 64 * 1024;  // elements per partition in one instruction
};

struct DmaSpec {
  int32_t engines = 16;
  int32_t queues_per_engine = 4;  // DMA instruction streams one plan may declare, per engine
  // The DMA queues one plan may declare: the queues scale with the engines, so a config that
  // changes arch.dma.engines keeps the same queues per engine.
  int32_t queues_max() const { return engines * queues_per_engine; }
  // The DMA engines transpose 2-byte elements in hardware (a copy whose source is read element
  // by element). Off by default, unlike the rest of these trn2 defaults: a compiler emits DMA
  // transposes only for a chip whose config says it has them (configs/trn2.json does).
  bool hardware_transpose = false;
};

// What the compiler's cost model (choosing where a transpose runs) knows of the chip's speeds.
// Not config keys: derived from the config's `timing` section (sim::cost_hints), when a config is
// loaded (runtime::config_from_json) or a sim::ChipConfig is made. A default-constructed
// CostHints knows no speed: every field is 0 and the compiler refuses it (require_priced), so no
// ArchSpec carries a chip's speeds without having been built from that chip's config.
struct CostHints {
  double tensor_freq_mhz = 0;             // timing.tensor.freq_mhz
  int64_t moving_min_cycles = 0;          // timing.tensor.moving_min_cycles
  double vector_elements_per_ns = 0;      // timing.vector: freq x elements per cycle
  int64_t vector_fixed_ns = 0;            // timing.vector.fixed_overhead_cycles / freq
  double scalar_elements_per_ns = 0;      // timing.scalar: freq x elements per cycle
  double dma_gb_per_s = 0;                // timing.dma.bandwidth_gb_per_s, per engine
  int64_t dma_chunk_overhead_bytes = 0;   // timing.dma.chunk_overhead_bytes
  int64_t dma_transpose_chunk_bytes = 0;  // timing.dma.transpose_chunk_bytes
  int64_t tensor_fp32_passes = 0;         // timing.tensor.fp32_slowdown
  int64_t tensor_latency_cycles = 0;      // timing.tensor.fill_cycles + drain_cycles
  int64_t lane_access_ns = 0;             // timing.vector.access_latency_cycles / freq
  double hbm_gb_per_s = 0;                // timing.hbm.bandwidth_gb_per_s (the core's share)
  int64_t hbm_latency_ns = 0;             // timing.hbm.latency_ns
  int64_t dma_issue_ns = 0;               // timing.dma.descriptor_issue_ns
  bool dma_issue_overlaps = false;        // timing.dma.issue_overlaps_transfer
  int64_t launch_ns = 0;                  // timing.launch.switch_ns + semaphore_reset_ns

  // Whether the engines' rates are known (a chip's timing filled them): the cost model divides
  // by them. The latencies and overheads may be 0.
  bool priced() const {
    return tensor_freq_mhz > 0 && vector_elements_per_ns > 0 && scalar_elements_per_ns > 0 &&
           dma_gb_per_s > 0;
  }
  // Throws std::invalid_argument naming `who` unless priced(): a caller that built an ArchSpec
  // by hand instead of from a chip config (sim::cost_hints).
  void require_priced(const char* who) const;

  // Passes through the array of an fp32 instruction (1 when not given).
  int64_t fp32_passes() const { return tensor_fp32_passes > 0 ? tensor_fp32_passes : 1; }

  // What a DMA descriptor moving `payload` bytes in `chunks` contiguous pieces costs its engine,
  // in bytes at the engine's bandwidth: the payload plus dma_chunk_overhead_bytes per chunk, as
  // the DMA model charges it (dma::descriptor_cost's engine_weight x bytes). The compiler prices
  // every DMA with this; T is int64_t for whole descriptors, double for rates and averages.
  template <class T>
  T dma_engine_bytes(T payload, T chunks) const {
    return payload + chunks * static_cast<T>(dma_chunk_overhead_bytes);
  }
};

struct HbmSpec {
  int64_t bytes = int64_t{12} << 30;
};

// Which memory spaces an engine may read and write.
struct SpaceAccess {
  std::vector<MemSpace> reads;
  std::vector<MemSpace> writes;
};

struct AccessRules {
  SpaceAccess tensor{{MemSpace::sbuf}, {MemSpace::psum}};
  SpaceAccess vector{{MemSpace::sbuf, MemSpace::psum}, {MemSpace::sbuf, MemSpace::psum}};
  SpaceAccess scalar{{MemSpace::sbuf, MemSpace::psum}, {MemSpace::sbuf, MemSpace::psum}};
  SpaceAccess dma{{MemSpace::hbm, MemSpace::sbuf, MemSpace::host},
                  {MemSpace::hbm, MemSpace::sbuf, MemSpace::host}};

  const SpaceAccess& of(Engine e) const;
};

struct ArchSpec {
  int32_t partition_alignment = 32;  // compute engines start on-chip accesses at multiples of this
  SbufSpec sbuf;
  PsumSpec psum;
  TensorArraySpec tensor;
  LaneEngineSpec vector;
  LaneEngineSpec scalar;
  DmaSpec dma;
  HbmSpec hbm;
  AccessRules access;
  CostHints costs;  // derived from timing, not read from `arch`

  bool may_read(Engine e, MemSpace s) const;
  bool may_write(Engine e, MemSpace s) const;
  int32_t partitions(MemSpace s) const;           // 0 for off-chip spaces
  int64_t bytes_per_partition(MemSpace s) const;  // 0 for off-chip spaces
};

// Cross-field consistency (e.g. an array with more rows than SBUF partitions). Throws
// InputError naming the JSON path under `prefix` (normally "arch").
void check_consistency(const ArchSpec& arch, const std::string& prefix);

template <class V>
void describe(V& v, SbufSpec& s) {
  v.field("partitions", s.partitions, {1, 1024}, "",
          "SBUF partitions (lanes of the compute engines)");
  v.field("bytes_per_partition", s.bytes_per_partition, {1024, int64_t{1} << 30}, "bytes",
          "SBUF capacity of one partition");
}
template <class V>
void describe(V& v, PsumSpec& s) {
  v.field("partitions", s.partitions, {1, 1024}, "", "PSUM partitions");
  v.field("bytes_per_partition", s.bytes_per_partition, {64, int64_t{1} << 24}, "bytes",
          "PSUM capacity of one partition");
  v.field("bank_bytes", s.bank_bytes, {64, int64_t{1} << 24}, "bytes",
          "PSUM bank size per partition; one matmul output must fit in one bank");
}
template <class V>
void describe(V& v, TensorArraySpec& s) {
  v.field("rows", s.rows, {1, 1024}, "", "systolic array rows = contraction partitions K");
  v.field("cols", s.cols, {1, 1024}, "",
          "systolic array columns = stationary free size M = output partitions");
  v.field("moving_free_max", s.moving_free_max, {1, 65536}, "elements",
          "largest moving-tile free size N of one matmul");
}
template <class V>
void describe(V& v, LaneEngineSpec& s) {
  v.field("free_max", s.free_max, {1, int64_t{1} << 24}, "elements",
          "largest free size (elements per partition) of one instruction");
}
template <class V>
void describe(V& v, DmaSpec& s) {
  v.field("engines", s.engines, {1, 256}, "", "DMA engines serving the core");
  v.field("queues_per_engine", s.queues_per_engine, {1, 16}, "",
          "DMA queues (instruction streams) one plan may declare per DMA engine: a plan "
          "declares at most engines x this many");
  v.field("hardware_transpose", s.hardware_transpose,
          "the DMA engines transpose 2-byte elements in hardware, so the compiler may load a "
          "transposed operand by DMA; left out: timing.dma.transpose_chunk_bytes > 0 (given "
          "with it, the two must agree)");
}
template <class V>
void describe(V& v, HbmSpec& s) {
  v.field("bytes", s.bytes, {1 << 20, int64_t{1} << 50}, "bytes", "HBM capacity of this device");
}
template <class V>
void describe(V& v, SpaceAccess& s) {
  v.field("reads", s.reads, "memory spaces the engine may read");
  v.field("writes", s.writes, "memory spaces the engine may write");
}
template <class V>
void describe(V& v, AccessRules& s) {
  v.section("tensor", s.tensor, "tensor engine");
  v.section("vector", s.vector, "vector engine");
  v.section("scalar", s.scalar, "scalar (activation) engine");
  v.section("dma", s.dma, "DMA engines");
}
template <class V>
void describe(V& v, ArchSpec& s) {
  v.field("partition_alignment", s.partition_alignment, {1, 1024}, "partitions",
          "compute-engine accesses start at a multiple of this partition");
  v.section("sbuf", s.sbuf, "state buffer: the on-chip scratchpad");
  v.section("psum", s.psum, "partial-sum buffer: the tensor engine's accumulator memory");
  v.section("tensor", s.tensor, "tensor engine (systolic array) geometry");
  v.section("vector", s.vector, "vector engine tile limits");
  v.section("scalar", s.scalar, "scalar (activation) engine tile limits");
  v.section("dma", s.dma, "DMA resources");
  v.section("hbm", s.hbm, "device memory");
  v.section("access", s.access, "which engine may read and write which memory space");
}

}  // namespace wallsim::isa
