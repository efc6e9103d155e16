// NkiKernel: writes a plan the way an NKI kernel is written — HBM tensors, SBUF and PSUM tiles,
// nl.load / nl.store, nc_matmul, copies — so that published NKI kernels can be rebuilt as
// wallsim plans instruction for instruction (docs/VALIDATION.md, "Real hardware").
//
// How NKI statements become instructions (the lowering the Neuron compiler documents):
// - A load or store of a [P x F] tile is one DMA transfer per DMA engine, each moving
//   ceil(P / engines) partitions (NKI trainium_inferentia2_arch: "loading a 128x512 ... tensor
//   to SBUF is best done through 16 DMA transfers (one per DMA engine), each moving a
//   scatter-gather list of 8 DMA buffers"). Loads and stores use separate queues of each engine.
// - nc_matmul runs on the tensor engine into a PSUM bank; nl.copy and SBUF accumulation
//   (`+=` of a PSUM tile into an SBUF tile) on the vector engine; nl.zeros of an SBUF tile is a
//   memset on the vector engine.
// - A tile declared inside a loop gets `buffers` rotating buffers (the compiler's
//   multi-buffering); TilePool decides how many fit.
// Dependencies are never written: the PlanBuilder derives every semaphore from byte ranges.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wallsim/compiler_stub/plan_builder.h"
#include "wallsim/isa/arch_spec.h"
#include "wallsim/isa/plan.h"

namespace wallsim::validation {

// A [partitions x free] region of an on-chip buffer (SBUF or PSUM).
struct Tile {
  compiler_stub::Slot slot;
  isa::DType dtype = isa::DType::bf16;
  int32_t partitions = 0;
  int64_t free = 0;    // elements per partition
  int64_t offset = 0;  // elements from the buffer's start, per partition
  // The sub-tile of columns [col, col + cols) (elements of this tile's dtype).
  Tile columns(int64_t col, int64_t cols) const;
};

// A 2-D HBM tensor [rows x cols], row-major.
struct HbmTensor {
  compiler_stub::Slot slot;
  isa::DType dtype = isa::DType::bf16;
  int64_t rows = 0, cols = 0;
};

class NkiKernel {
 public:
  NkiKernel(std::string name, const isa::ArchSpec& arch);

  HbmTensor hbm_tensor(const std::string& name, isa::DType dtype, int64_t rows, int64_t cols,
                       isa::TensorRole role);

  // A pool of `buffers` rotating tiles of [partitions x free] in `space`; each next() returns
  // the following one. Space is taken from SBUF (or PSUM) bump-allocated; throws
  // std::invalid_argument when it does not fit.
  class TilePool {
   public:
    Tile next();
    int buffers() const { return static_cast<int>(m_tiles.size()); }

   private:
    friend class NkiKernel;
    std::vector<Tile> m_tiles;
    size_t m_next = 0;
  };
  TilePool pool(const std::string& name, isa::MemSpace space, isa::DType dtype, int32_t partitions,
                int64_t free, int buffers);
  // Bytes per partition still free in `space`.
  int64_t free_bytes(isa::MemSpace space) const;

  // dst = src[row0 : row0 + dst.partitions, col0 : col0 + dst.free] (nl.load)
  void load(const Tile& dst, const HbmTensor& src, int64_t row0, int64_t col0);
  // dst[row0 : ..., col0 : ...] = src (nl.store)
  void store(const HbmTensor& dst, int64_t row0, int64_t col0, const Tile& src);
  // psum (+)= stationary[K, M]^T . moving[K, N]; `start` overwrites, `stop` ends the group.
  void matmul(const Tile& psum, const Tile& stationary, const Tile& moving, bool start, bool stop);
  void copy(const Tile& dst, const Tile& src);              // vector tensor_copy
  void add(const Tile& dst, const Tile& a, const Tile& b);  // vector tensor_tensor add
  void zero(const Tile& dst);                               // vector memset 0

  isa::Plan build();

 private:
  void dma(bool is_load, const isa::AccessPattern& sbuf, const isa::AccessPattern& hbm);
  int queue(bool is_load, int engine);

  isa::ArchSpec m_arch;
  compiler_stub::PlanBuilder m_builder;
  int64_t m_used[2] = {0, 0};  // bytes per partition allocated in SBUF, PSUM
  std::vector<int> m_load_queues, m_store_queues;
};

}  // namespace wallsim::validation
