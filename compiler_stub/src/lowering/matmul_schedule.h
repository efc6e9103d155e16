// The matmul family's schedule space (issue 35): a point (M, N and K blocking, buffers, how A^T
// is made), the facts of one matmul it is priced on, and the cost model that ranks the points
// from the chip's own figures (isa::CostHints). Pure arithmetic: no context, nothing emitted.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "wallsim/isa/arch_spec.h"

namespace wallsim::compiler_stub::lowering {

// `base`: A is a transposed view (base^T) of a tensor in HBM, so A^T's rows are the base's,
// loaded as they are (no transpose at all).
enum class TransposeRoute { array, dma_transpose, strided_dma, base };
const char* name_of(TransposeRoute r);

// One point of a matmul's schedule space. The loop order is fixed: a block of A's row tiles
// (a row window) stays resident as A^T stationaries while B streams past it by panels (or, K
// blocked, by slabs of one K chunk), so B is read from HBM once per M block (once per turn of
// PSUM-bank-sized row groups when K-blocked) and A once. Today's rules (matmul_blocking.h) are
// one point of it.
struct MatmulSchedule {
  bool narrow = false;       // output by column blocks stored as made, A loaded by K chunks
  bool k_blocked = false;    // B by slabs of one K chunk through a ring of `buffers` (narrow only)
  int64_t panel_cols = 0;    // N block: columns of one streamed panel (K-blocked: of one block)
  int64_t window_tiles = 0;  // M block: A's row tiles per row window
  int64_t buffers = 2;       // panels (slabs) of B in flight; panels: loaded this many ahead
  // B loaded whole before the multiplies (as its rule loads a B that fits SBUF: row tiles of
  // all columns), kept for the whole op; otherwise B streams by panels in the order the
  // multiplies read them (a panel's K chunks one DMA each), `buffers` panels at a time.
  bool b_whole = false;
  // A's and B's loads cut as finely as a load that waits for compute (dma_dependent_split_bytes)
  // over the queues, in the order the multiplies read them: the first multiply waits for its
  // pieces at every engine's rate, not for every operand's first piece sharing HBM.
  bool fine_loads = false;
  TransposeRoute a_route = TransposeRoute::array;  // how A^T is made (stationary_route)
  // A is an im2col window of x: x's planes resident, the windows read from SBUF by the array
  // (window_matmul.cpp); the other fields then describe its output tiles and blocks.
  bool conv_window = false;
  std::string describe() const;
};

// A^T made through the array (lower_matmul.cpp's matmul_block): a lone row tile's stationaries
// are made this many K chunks ahead of its multiplies, not all before them.
constexpr int64_t kStationaryLead = 4;
// A row tile's A^T chunks leave PSUM in groups: its first chunk alone (the array multiplies once
// it is evacuated), then as many chunks transposed side by side into a PSUM bank as its fp32
// columns hold at `rows` a chunk (and one lane instruction spans, `free_max`), each group
// evacuated by one lane instruction; for a lone row tile, whose multiplies follow its
// stationaries closely, at most half the lead (a group is evacuated while the array multiplies
// the one before). A shorter last K chunk is a group of its own.
inline int64_t at_group(int64_t bank_bytes, int64_t free_max, int64_t rows, bool lone) {
  const int64_t fit = std::min(bank_bytes / 4, free_max) / std::max<int64_t>(1, rows);
  return std::max<int64_t>(1, lone ? std::min(fit, kStationaryLead / 2) : fit);
}
// The evacuations of a row tile's A^T of `full` K chunks of the array's rows and `part` (0 or 1)
// shorter ones, in groups of `group` after the first.
inline int64_t at_evacuations(int64_t full, int64_t part, int64_t group) {
  return (full > 0 ? 1 + (full - 1 + group - 1) / group : 0) + part;
}

// K-blocked output blocks of `block` columns side by side in a PSUM bank: 1 for blocks as wide
// as a bank or as the output (`n` columns; a bank each, as the rules lay them out), else as many
// as fit a bank.
inline int64_t slab_per_bank(int64_t bank_cols, int64_t block, int64_t n) {
  return block >= std::min(bank_cols, n) ? 1 : std::max<int64_t>(1, bank_cols / block);
}

// Output blocks of `block` columns a K-blocked turn may accumulate at once. A bank each: every
// bank but two (the next group's first matmuls need not wait for the last evacuations of this
// one). Narrower blocks, side by side in a bank: half the banks' slots, so the next group
// accumulates in the other half while this one's (many) blocks are evacuated.
inline int64_t slab_slots(int64_t psum_banks, int64_t bank_cols, int64_t block, int64_t n) {
  const int64_t per_bank = slab_per_bank(bank_cols, std::max<int64_t>(1, block), n);
  return per_bank == 1 ? std::max<int64_t>(1, psum_banks - 2)
                       : std::max<int64_t>(1, psum_banks / 2) * per_bank;
}

// What the cost model needs of one matmul [M x K] x [K x N]: sizes, element bytes, where A is.
struct MatmulFacts {
  int64_t M = 0, K = 0, N = 0;
  int64_t a_bytes = 2, b_bytes = 2, out_bytes = 2;  // per element
  bool fp32 = false;          // an operand is fp32: the array takes CostHints::fp32_passes() passes
  bool a_loaded = true;       // A is in HBM (not resident in SBUF)
  bool a_transposed = false;  // A is a transposed view: its rows load element by element
  bool b_transposed =
      false;                // B is a transposed view: its base's rows load and go through the array
  int64_t tile_rows = 128;  // output partitions per row tile
  int64_t k_rows = 128;     // contraction rows per K chunk (the array's rows)
  int64_t moving_cols = 512;  // the widest moving tile
  int64_t psum_banks = 8;
  int64_t dma_engines = 16;
  int64_t dma_split_bytes = 256 * 1024;  // compiler.dma_split_bytes: one engine per piece
  int64_t dma_min_chunk_bytes = 4096;    // compiler.dma_min_chunk_bytes
  int64_t load_queues = 32;              // queues a plan loads through
};

// The model's breakdown (ns): the engines' and the memory's busy times, which overlap, and the
// parts that do not (the first loads before any multiply, the last store after the last one,
// the start of each later M block).
struct MatmulCost {
  double tensor_ns = 0, lanes_ns = 0, dma_ns = 0, hbm_ns = 0;
  // Chains of dependent steps: output stored by column blocks (a block's evacuation reuses the
  // buffer a store one M block of blocks back reads, and stores go one engine each), and a
  // transposed B's transposes, each evacuated before the multiply that reads it.
  double store_chain_ns = 0;
  double prologue_ns = 0, epilogue_ns = 0, window_ns = 0;
  int64_t hbm_bytes = 0;  // read + written
  int64_t matmuls = 0;    // array instructions (multiplies and transposes)
  double total_ns() const;
};

// The index of the point whose describe() is `text` in `points`; points.size() when none.
size_t find_point(const std::vector<MatmulSchedule>& points, const std::string& text);

MatmulCost predict_matmul(const MatmulFacts& f, const MatmulSchedule& s, const isa::ArchSpec& arch);

}  // namespace wallsim::compiler_stub::lowering
