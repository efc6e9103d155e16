// Row windows: an op too large for SBUF runs a few row tiles at a time. An op whose output row
// tile t needs only row tile t of its operands with as many rows (and whole smaller operands:
// weights, biases, masks) can run over windows of consecutive row tiles (ops.def's row_window
// column says which ops can, and how their footprint is counted). Each window loads its rows,
// computes, stores its output rows to HBM and frees them: the op streams through HBM instead
// of failing, and its output is spilled (counted).
#include <algorithm>

#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub::lowering {

// Operands whose row tile t is all that output row tile t needs: A of a matmul, or any
// operand with as many rows as the output.
bool LoweringContext::row_aligned(const Node& n, size_t k) const {
  switch (info(n.op).row_window) {
    case RowWindow::matmul:
    case RowWindow::batch_matmul:
      return k == 0;
    case RowWindow::none:
    case RowWindow::operands:
    case RowWindow::gather:
    case RowWindow::softmax:
    case RowWindow::norm:
      break;
  }
  return view_of(type_of(n.inputs[k])).rows == view_of(n.type).rows;
}

bool LoweringContext::batch_broadcast(const Node& n) const {
  if (info(n.op).row_window == RowWindow::batch_matmul) return false;  // B loaded per entry
  const int64_t rows = view_of(n.type).rows;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    // A matmul's B (and fused bias) is a whole operand, not repeated along A's rows, even when
    // A has a multiple of K rows.
    if (info(n.op).row_window == RowWindow::matmul && k > 0) break;
    const int64_t r = view_of(type_of(n.inputs[k])).rows;
    if (r > 1 && r < rows && rows % r == 0) return true;
  }
  return false;
}

bool LoweringContext::column_local(const Node& n) const {
  if (info(n.op).row_window != RowWindow::operands || n.op == OpKind::iota) return false;
  const int64_t cols = view_of(n.type).cols;
  if (cols < 2) return false;  // a reduction over the last axis, say
  for (int32_t in : n.inputs) {
    const int64_t c = view_of(type_of(in)).cols;
    if (c != cols && c != 1) return false;
  }
  return true;
}

// As allocated: every SBUF buffer is rounded up to the allocator's alignment, so a value of
// many narrow tiles (a pooling window of 3 columns) takes far more than its bytes.
int64_t LoweringContext::value_bytes_per_tile(int32_t id) const {
  const TensorType& t = type_of(id);
  return SbufAllocator::aligned(view_of(t).cols * isa::dtype_bytes(t.dtype));
}

// Bytes per partition, per output row tile and fixed, that `n` needs if nothing is resident.
std::pair<int64_t, int64_t> LoweringContext::footprint(const Node& n) const {
  const RowWindow rule = info(n.op).row_window;
  int64_t per_tile = value_bytes_per_tile(n.id), fixed = 0;
  // A gather: its ids and table stay in HBM; each output tile needs its ids' tile.
  if (rule == RowWindow::gather) return {per_tile + 4, 0};
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const int32_t in = n.inputs[k];
    const bool aligned = row_aligned(n, k);
    if (m_tiles.count(in) && aligned) continue;  // resident: nothing new per tile
    // A matmul's A loaded as transposed stationaries: only A^T (below) per tile.
    if (aligned && rule == RowWindow::matmul && k == 0 && !narrow_matmul(*this, n) &&
        stationary_route(*this, n) != TransposeRoute::array)
      continue;
    if (aligned) {
      per_tile += value_bytes_per_tile(in);
    } else if (rule == RowWindow::batch_matmul && k == 1 && bmm_chunk_entries(*this, n)) {
      fixed += sbuf_share(m_options.streamed_operand_percent);  // a chunk of B's entries
    } else if (rule == RowWindow::norm && norm_chunk_cols(*this, n)) {
      // gamma and beta by column chunks (below)
    } else if (!m_tiles.count(in) &&
               !(rule == RowWindow::matmul && k == 1 && streams_b(*this, n))) {
      fixed += value_bytes_per_tile(in) *
               tiling(view_of(type_of(in)).rows, 1, DType::fp32, run_of(type_of(in))).count();
    }
  }
  const int64_t cols = view_of(n.type).cols;
  switch (rule) {
    case RowWindow::softmax:
      fixed += SbufAllocator::aligned(cols * 4) + 64;
      break;
    case RowWindow::norm:
      if (const int64_t cb = norm_chunk_cols(*this, n)) {
        per_tile += 64;  // its statistics
        for (size_t k = 0; k < n.inputs.size(); ++k) {
          fixed += SbufAllocator::aligned(
              cb * (k == 0 ? 4 : isa::dtype_bytes(type_of(n.inputs[k]).dtype)));
        }
      } else {
        fixed += 2 * SbufAllocator::aligned(cols * 4) + 64;
      }
      break;
    case RowWindow::matmul:
    case RowWindow::batch_matmul: {
      const TensorType& a = type_of(n.inputs[0]);
      if (narrow_matmul(*this, n)) {
        // A^T and one output column block per tile; one K chunk of A and B's panels fixed.
        per_tile = row_tile_bytes(*this, n, true);
        if (!m_tiles.count(n.inputs[0])) {
          per_tile -= SbufAllocator::aligned(m_tile_rows * isa::dtype_bytes(a.dtype));
          fixed += SbufAllocator::aligned(m_tile_rows * isa::dtype_bytes(a.dtype));
        }
        if (slab_cols(*this, n)) {
          fixed += slab_ring_bytes(*this, n);
        } else if (streams_b(*this, n)) {
          fixed += panel_buffers(*this, n) * panel_bytes(*this, n);
        }
        break;
      }
      per_tile += stationary_bytes(*this, n);  // A^T stationaries
      // Loaded by DMA, the next window's A^T loads beside this window's (release_later).
      if (rule == RowWindow::matmul && stationary_route(*this, n) != TransposeRoute::array)
        per_tile += stationary_bytes(*this, n);
      if (rule == RowWindow::matmul && streams_b(*this, n)) {
        const int64_t width = panel_cols(*this, n);
        const int64_t blocks = (view_of(type_of(n.inputs[1])).cols + width - 1) / width;
        fixed += std::min(panel_buffers(*this, n), blocks) * panel_bytes(*this, n);
      }
      break;
    }
    case RowWindow::none:
    case RowWindow::operands:
    case RowWindow::gather:
      break;
  }
  return {per_tile, fixed};
}

int64_t LoweringContext::tile_count(const Node& n) const {
  return tiling(view_of(n.type).rows, 1, DType::fp32, run_of(n.type)).count();
}

int64_t LoweringContext::pinned_bytes(const Node& n) const {
  int64_t pinned = 0;  // resident operands stay whole while the op runs
  for (int32_t in : n.inputs) {
    if (m_tiles.count(in)) pinned += m_tiles.at(in).count() * value_bytes_per_tile(in);
  }
  return pinned;
}

int64_t LoweringContext::window_room(const Node& n) const {
  return (m_sbuf.capacity() - pinned_bytes(n)) * m_options.row_window_fill_percent / 100;
}

bool LoweringContext::too_wide(const Node& n, int64_t one_tile) const {
  return one_tile > m_sbuf.capacity() - pinned_bytes(n);
}

bool LoweringContext::row_windowed(const Node& n) const {
  if (info(n.op).row_window == RowWindow::none) return false;
  // The convolution window route keeps its own SBUF (window_matmul.cpp).
  if (const MatmulSchedule* s = matmul_schedule(n.id); s && s->conv_window) return false;
  // A matmul schedule's M block smaller than the op: windows of that many row tiles.
  if (const MatmulSchedule* s = matmul_schedule(n.id);
      s && s->window_tiles > 0 && s->window_tiles < tile_count(n))
    return true;
  const auto [per_tile, fixed] = footprint(n);
  const int64_t trigger = sbuf_share(m_options.row_window_trigger_percent);
  // One row tile too wide for the SBUF left runs in column windows.
  if (tile_count(n) < 2) return column_local(n) && too_wide(n, per_tile + fixed);
  return per_tile * tile_count(n) + fixed > trigger;
}

LowerResult LoweringContext::lower_in_windows(const Node& n, const LowerFn& lower) {
  const int64_t tiles = tile_count(n);
  auto [per_tile, fixed] = footprint(n);
  const int64_t pinned = pinned_bytes(n);
  auto window_of = [&](int64_t fixed_bytes, int64_t per) {
    const int64_t budget =
        (m_sbuf.capacity() - pinned - fixed_bytes) * m_options.row_window_fill_percent / 100;
    return std::max<int64_t>(1, budget / std::max<int64_t>(1, per));
  };
  // An operand that repeats along the batch dims (a mask over every head) has `period` tiles.
  // Windows hold whole periods while it fits whole; else each window lies within one period
  // and loads only the operand's tiles that line up with it.
  int32_t repeated = -1;
  int64_t period = 0;
  if (batch_broadcast(n)) {
    for (int32_t in : n.inputs) {
      const TensorType& t = type_of(in);
      const int64_t r = view_of(t).rows;
      if (r > 1 && r < view_of(n.type).rows) {
        repeated = in;
        period = tiling(r, 1, DType::fp32, run_of(t)).count();
        break;
      }
    }
  }
  // An op with one row tile too wide for the room left runs a block of columns at a time
  // (whole row tiles of each block in turn), when its columns are independent.
  const int64_t cols = view_of(n.type).cols;
  int64_t block = cols;
  const int64_t room = window_room(n);
  // Column-local, with fewer than kRingTiles row tiles a window at full width: loads,
  // compute and stores would take turns (tiny's 16 KiB partitions hold one [32, 1024] fp32
  // add's three tiles). Column blocks narrowed until kRingTiles fit make a ring instead:
  // windows of half the room, in the bytes freed longest ago, so one window loads while the
  // one before computes and the one before that stores.
  constexpr int64_t kRingTiles = 3;
  const bool ring = column_local(n) && per_tile * kRingTiles + fixed > room;
  if (ring) {
    block = std::max<int64_t>(1, cols * room / (per_tile * kRingTiles + fixed));
    if (block > 64) block = block / 64 * 64;
    const int64_t blocks = (cols + block - 1) / block;
    block = (cols + blocks - 1) / blocks;  // balanced blocks
    per_tile = (per_tile * block + cols - 1) / cols;
    fixed = (fixed * block + cols - 1) / cols;
  }
  int64_t w = window_of(fixed, per_tile);
  if (ring) w = std::max<int64_t>(1, w / 2);
  if (const MatmulSchedule* s = matmul_schedule(n.id); s && s->window_tiles > 0)
    w = std::min(w, s->window_tiles);  // the schedule's M block
  bool split_periods = false;
  if (period > 0) {
    if (w >= period) {
      w = w / period * period;
    } else if (!m_tiles.count(repeated)) {
      split_periods = true;  // the repeated operand's tiles become per-window
      const int64_t bytes = value_bytes_per_tile(repeated);
      w = std::min(period, window_of(fixed - bytes * period, per_tile + bytes));
    } else {
      w = period;
    }
  }
  std::set<int32_t> ids = {n.id}, col_ids;
  std::map<int32_t, Tiles> resident;  // aligned operands on chip: windows of their tiles
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const int32_t in = n.inputs[k];
    if (block < cols && view_of(type_of(in)).cols == cols) col_ids.insert(in);
    if (!row_aligned(n, k)) continue;
    ids.insert(in);
    if (m_tiles.count(in)) resident[in] = m_tiles[in];
  }
  if (block < cols) col_ids.insert(n.id);
  // Balanced windows: a short last window would leave its fixed costs (a streamed B's
  // panels) less work to hide behind. Windows never cross a period when they split one.
  std::vector<std::pair<int64_t, int64_t>> ranges;
  auto balance = [&](int64_t begin, int64_t end, int64_t unit) {
    const int64_t count = end - begin, units = (count + unit - 1) / unit;
    const int64_t windows = (count + w - 1) / w;
    for (int64_t i = 0; i < windows; ++i) {
      const int64_t t0 = std::min(end, begin + units * i / windows * unit);
      const int64_t t1 = std::min(end, begin + units * (i + 1) / windows * unit);
      if (t0 < t1) ranges.emplace_back(t0, t1);
    }
  };
  if (split_periods) {
    for (int64_t p = 0; p < tiles; p += period) balance(p, std::min(tiles, p + period), 1);
  } else {
    balance(0, tiles, period > 0 ? period : 1);
  }
  const isa::TensorRole role =
      needed_outside(n.id) ? isa::TensorRole::output : isa::TensorRole::scratch;
  for (int64_t c0 = 0; c0 < cols; c0 += block)
    for (const auto& [t0, t1] : ranges) {
      m_window = Window{ids, t0, t1, {}, col_ids, c0, block < cols ? block : 0, ring};
      if (split_periods) m_window->own[repeated] = {t0 % period, (t1 - 1) % period + 1};
      for (const auto& [id, full] : resident) {
        m_tiles[id] = full.window(t0, t1);
        if (col_ids.count(id)) {
          m_tiles[id].col_base = c0;
          m_tiles[id].cols = std::min(block, cols - c0);
        }
      }
      if (auto e = lower(*this, n)) return e;
      if (too_large()) return too_large_error();
      // A lowering may have written its window's output to HBM itself (a matmul too wide for
      // one row tile stores it by column blocks).
      if (m_tiles.count(n.id)) {
        const int64_t before = m_bytes_out;
        if (!store(n.id, role)) return no_room();
        if (role == isa::TensorRole::scratch) m_spill_bytes += m_bytes_out - before;
        release(m_tiles.at(n.id));
        m_tiles.erase(n.id);
      }
      // Free the window: the operand rows it loaded.
      std::set<int32_t> loaded = ids;
      if (split_periods) loaded.insert(repeated);
      for (int32_t in : loaded) {
        if (in == n.id || resident.count(in) || !m_tiles.count(in)) continue;
        release(m_tiles.at(in));
        m_tiles.erase(in);
      }
      // Row vectors broadcast over a column window hold only its columns.
      for (int32_t in : col_ids) {
        auto r = m_replicated.find(in);
        if (r == m_replicated.end()) continue;
        release(r->second);
        m_replicated.erase(r);
      }
    }
  m_window.reset();
  release_held();
  for (const auto& [id, full] : resident) m_tiles[id] = full;
  if (role == isa::TensorRole::scratch) ++m_spills;
  return std::nullopt;
}

}  // namespace wallsim::compiler_stub::lowering
