// The matmul family's lowering shared by lower_matmul.cpp and lower_batch_matmul.cpp: the moving
// operand as matmul_block takes it, and matmul_block itself (A's row tiles times B's K chunks).
#pragma once

#include <optional>
#include <vector>

#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub::lowering {

// The moving operand: resident tiles, or (a large B in HBM) panels streamed per column block.
struct Moving {
  Tiles tiles;  // tiling; with storage when resident
  bool streamed = false;
  Slot hbm;
  std::optional<ViewDesc> view;  // a streamed B read through a strided view of its base
  // The view is its base [N x K] transposed: each panel loads the base's rows (contiguous)
  // and transposes them through the array, instead of an element-strided DMA.
  bool transposed = false;
  int64_t block_cols = 0;  // columns per panel when streamed
  int64_t buffers = 2;     // panels loaded at a time when streamed (panel_buffers())
  int64_t slab_cols = 0;   // K-blocked: columns per slab (slab_cols())
  int64_t slab_block = 0;  // K-blocked: columns per output block (slab_block_cols())
  int64_t slab_ring = 0;   // K-blocked: slabs in the ring (slab_ring())
  // Panel 0, already loaded (lower_matmul: right after A's first row tile, before the others).
  std::optional<Slot> first_panel;
};

// One K chunk of a row tile's A^T (a stationary): `col` columns into buffer `s`, which holds the
// chunks transposed into one PSUM bank side by side and evacuated together (matmul_block); the
// chunk at column 0 owns the buffer.
struct AtChunk {
  Slot s;
  int64_t col = 0;
};

inline AccessPattern stationary_ap(const AtChunk& c, DType dt, int32_t k, int64_t m) {
  return LoweringContext::sbuf_ap(c.s, dt, k, c.col, m);
}
// Releases the buffers of a row tile's A^T chunks (each once: through the chunk that owns it).
template <class Release>
void release_chunks(const std::vector<AtChunk>& row, Release&& release) {
  for (const AtChunk& c : row)
    if (c.col == 0) release(c.s);
}

// A narrow matmul's A and output in HBM: A's row tiles are loaded a K chunk at a time (unless
// on chip), each output column block is stored as soon as it is evacuated.
struct Narrow {
  bool a_in_hbm = false;
  Slot a, out;
  View a_view, out_view;
  DType a_dtype = DType::fp32;
};

struct Bias;
struct Epilogue;
struct HbmStationaries;

// Output row tiles `ts` of A times B's K chunks `kc` (B's rows from k_base), into `out`: A^T
// made (or loaded) per row tile, each column block accumulated over K in a PSUM bank and
// evacuated; `narrow`: output by column blocks stored as made (lower_matmul.cpp).
LowerResult matmul_block(LoweringContext& ctx, const Tiles& a, const std::vector<int64_t>& ts,
                         const Moving& b, const std::vector<int64_t>& kc, int64_t k_base,
                         const Tiles& out, const Narrow* narrow = nullptr,
                         const Bias* bias = nullptr, const Epilogue* epilogue = nullptr,
                         const HbmStationaries* a_t = nullptr, int32_t a_id = -1);

// Output row tiles `ts` of a narrow matmul with K-blocked B (slab_cols()), from their A^T
// stationaries `at` (k_blocked.cpp).
LowerResult k_blocked(LoweringContext& ctx, const Tiles& a, const std::vector<int64_t>& ts,
                      const std::vector<std::vector<AtChunk>>& at, const Moving& b,
                      const std::vector<int64_t>& kc, const Tiles& out, const Narrow& narrow);

LowerResult lower_batch_matmul(LoweringContext& ctx, const Node& n);

}  // namespace wallsim::compiler_stub::lowering
