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

int64_t LoweringContext::value_bytes_per_tile(int32_t id) const {
  const TensorType& t = type_of(id);
  return view_of(t).cols * isa::dtype_bytes(t.dtype);
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
    if (aligned) {
      per_tile += value_bytes_per_tile(in);
    } else if (rule == RowWindow::batch_matmul && k == 1 && bmm_chunk_entries(*this, n)) {
      fixed += sbuf_share(m_options.streamed_operand_percent);  // a chunk of B's entries
    } else if (!m_tiles.count(in) &&
               !(rule == RowWindow::matmul && k == 1 && streams_b(*this, n))) {
      fixed += value_bytes_per_tile(in) *
               tiling(view_of(type_of(in)).rows, 1, DType::fp32, run_of(type_of(in))).count();
    }
  }
  const int64_t cols = view_of(n.type).cols;
  switch (rule) {
    case RowWindow::softmax:
      fixed += cols * 4 + 64;
      break;
    case RowWindow::norm:
      fixed += 2 * cols * 4 + 64;
      break;
    case RowWindow::matmul:
    case RowWindow::batch_matmul: {
      const TensorType& a = type_of(n.inputs[0]);
      per_tile += view_of(a).cols * isa::dtype_bytes(a.dtype);  // A^T stationaries
      if (rule == RowWindow::matmul && streams_b(*this, n)) {
        const int64_t width = panel_cols(*this, n);
        const int64_t blocks = (view_of(type_of(n.inputs[1])).cols + width - 1) / width;
        fixed += std::min<int64_t>(2, blocks) * panel_bytes(*this, n);
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

bool LoweringContext::row_windowed(const Node& n) const {
  if (info(n.op).row_window == RowWindow::none || tile_count(n) < 2) return false;
  const auto [per_tile, fixed] = footprint(n);
  return per_tile * tile_count(n) + fixed > sbuf_share(m_options.row_window_trigger_percent);
}

LowerResult LoweringContext::lower_in_windows(const Node& n, const LowerFn& lower) {
  const int64_t tiles = tile_count(n);
  const auto [per_tile, fixed] = footprint(n);
  // Windows hold whole runs (batches) so batch-broadcast operands line up; a batch_matmul has
  // none (B is loaded per batch entry), so its windows may split a batch.
  const int64_t run = run_of(n.type);
  const int64_t unit = run > 0 && info(n.op).row_window != RowWindow::batch_matmul
                           ? tiling(run, 1, DType::fp32).count()
                           : 1;
  int64_t pinned = 0;  // resident operands stay whole while the op runs
  for (int32_t in : n.inputs) {
    if (m_tiles.count(in)) pinned += m_tiles.at(in).count() * value_bytes_per_tile(in);
  }
  const int64_t budget =
      (m_sbuf.capacity() - pinned - fixed) * m_options.row_window_fill_percent / 100;
  int64_t w = budget / std::max<int64_t>(1, per_tile);
  w = std::max<int64_t>(unit, w / unit * unit);
  std::set<int32_t> ids = {n.id};
  std::map<int32_t, Tiles> resident;  // aligned operands on chip: windows of their tiles
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    if (!row_aligned(n, k)) continue;
    ids.insert(n.inputs[k]);
    if (m_tiles.count(n.inputs[k])) resident[n.inputs[k]] = m_tiles[n.inputs[k]];
  }
  const isa::TensorRole role =
      needed_outside(n.id) ? isa::TensorRole::output : isa::TensorRole::scratch;
  // Balanced windows: a short last window would leave its fixed costs (a streamed B's
  // panels) less work to hide behind.
  const int64_t units = (tiles + unit - 1) / unit, windows = (tiles + w - 1) / w;
  for (int64_t i = 0; i < windows; ++i) {
    const int64_t t0 = std::min(tiles, units * i / windows * unit);
    const int64_t t1 = std::min(tiles, units * (i + 1) / windows * unit);
    if (t0 >= t1) continue;
    m_window = Window{ids, t0, t1};
    for (const auto& [id, full] : resident) m_tiles[id] = full.window(t0, t1);
    if (auto e = lower(*this, n)) return e;
    const int64_t before = m_bytes_out;
    if (!store(n.id, role)) return no_room();
    if (role == isa::TensorRole::scratch) m_spill_bytes += m_bytes_out - before;
    // Free the window: the output's rows and the operand rows it loaded.
    release(m_tiles.at(n.id));
    m_tiles.erase(n.id);
    for (int32_t in : ids) {
      if (in == n.id || resident.count(in) || !m_tiles.count(in)) continue;
      release(m_tiles.at(in));
      m_tiles.erase(in);
    }
  }
  m_window.reset();
  for (const auto& [id, full] : resident) m_tiles[id] = full;
  if (role == isa::TensorRole::scratch) ++m_spills;
  return std::nullopt;
}

}  // namespace wallsim::compiler_stub::lowering
