// The cost of one DMA descriptor in plain C++: the route it takes, the resources it uses and
// how much of each, its contiguous chunks and its latency tail. DmaSystem applies it.
#pragma once

#include <cstdint>
#include <string>

#include "wallsim/dma/dma_timing.h"
#include "wallsim/isa/instruction.h"
#include "wallsim/memory/memory_timing.h"

namespace wallsim::dma {

struct DescriptorCost {
  isa::Opcode op = isa::Opcode::dma_copy;
  isa::MemSpace src = isa::MemSpace::hbm, dst = isa::MemSpace::sbuf;
  bool transpose = false;           // a 2-byte element transpose: hardware DMA transpose or strided
  bool hardware_transpose = false;  // it uses the DMA engine's transpose (transpose_chunk_bytes)
  int64_t bytes = 0;                // payload: the elements moved
  int64_t chunks = 0;       // contiguous pieces the engine moves, each paying chunk_overhead_bytes
  int64_t index_bytes = 0;  // gather/scatter: the index tensor read
  // Resource bytes per payload byte: DMA engine (chunk overhead and index read included), HBM
  // (1 per end in HBM, plus an index read from HBM), host link (1 per end in host memory).
  double engine_weight = 1.0;
  double hbm_weight = 0.0;
  double link_weight = 0.0;
  int64_t hbm_read_bytes = 0, hbm_write_bytes = 0, link_bytes = 0;
  int64_t latency_ns = 0;  // tail after the transfer: HBM latency and/or host-link latency

  // "hbm->sbuf", "hbm->hbm", "gather hbm->sbuf", "hbm->sbuf (dma transpose)", ... (TIMING.md §5)
  std::string route() const;
};

// Contiguous run of a pattern in elements: the innermost dimensions that follow each other in
// memory (and, off chip, the rows when they continue the run). At least 1.
int64_t contiguous_elements(const isa::AccessPattern& ap);

// What `in` (dma_copy, dma_gather or dma_scatter) costs. Depends on shapes, dtypes and strides
// only, never on data (an indirect access is costed by its size). Throws std::invalid_argument
// for a non-DMA instruction.
DescriptorCost descriptor_cost(const isa::Instruction& in, const DmaTiming& dma,
                               const memory::HbmTiming& hbm, const HostLinkTiming& link);

}  // namespace wallsim::dma
