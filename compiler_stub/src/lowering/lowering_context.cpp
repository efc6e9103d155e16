// LoweringContext: tiling within row windows, loads and stores of values, operands, weight
// prefetch, errors. Row windows, spilling and views are in their own files; the values' state
// in value_store.cpp, emission in emitter.cpp.
#include "lowering/lowering_context.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace wallsim::compiler_stub::lowering {

namespace {
int32_t tile_rows_for(const isa::ArchSpec& a) {
  return std::min({a.sbuf.partitions, a.psum.partitions, a.tensor.rows, a.tensor.cols});
}
}  // namespace

LoweringContext::LoweringContext(const Graph& graph, const std::vector<int32_t>& group,
                                 const GraphUses& uses, const isa::ArchSpec& arch,
                                 const LoweringOptions& options, const std::string& plan_name)
    : Emitter(arch, options, plan_name, tile_rows_for(arch)),
      ValueStore(graph, group, uses, builder(), tile_rows_for(arch), arch.sbuf.bytes_per_partition),
      m_arch(arch),
      m_options(options) {}

void LoweringContext::index_uses(const std::vector<int32_t>& order) {
  ValueStore::index_uses(order, [&](const Node& n) { return spliced_reads(*this, n); });
}

void LoweringContext::begin_node(const Node& n, int position) {
  begin_op(n.id, position);
  m_pinned = {n.id};
  m_pinned.insert(n.inputs.begin(), n.inputs.end());
  builder().add_node(n.id, n.name.empty() ? value_name(m_graph, n.id) : n.name,
                     std::string(info(n.op).name));
  // What the op needs, as it starts: a "does not fit" error reports these, not the state
  // after some operands were loaded (they would look resident and cost nothing).
  m_need.reset();
  choose_matmul_schedule(n);
  if (info(n.op).row_window != RowWindow::none) {
    const auto [per_tile, fixed] = footprint(n);
    m_need = Need{per_tile, fixed, pinned_bytes(n)};
  }
}

CompileError LoweringContext::error(const std::string& reason) const {
  const Node* n = m_graph.find(current_node());
  return {current_node(), n ? std::string(info(n->op).name) : "?", reason, n ? n->name : ""};
}

CompileError LoweringContext::no_room() const {
  if (m_load_error) return error(*m_load_error);
  std::string need;
  if (m_need) {
    need = ": one row tile needs " + std::to_string(m_need->per_tile) +
           " bytes per partition, plus " + std::to_string(m_need->fixed) +
           " for whole operands and scratch";
    if (m_need->pinned > 0) {
      need += ", beside " + std::to_string(m_need->pinned) + " of operands already on chip";
    }
  }
  return error("the op's working set does not fit in SBUF (" +
               std::to_string(m_arch.sbuf.bytes_per_partition) +
               " bytes per partition) even with every other value spilled to HBM" + need);
}

CompileError LoweringContext::too_large_error() const {
  return error("the plan needs more than " + std::to_string(m_options.max_plan_instructions) +
               " instructions (compiler.max_plan_instructions): the op's tiles are small for "
               "this chip");
}

std::optional<Tiles> LoweringContext::new_tiles(int64_t rows, int64_t cols, DType dt,
                                                const std::string& hint, int64_t run, int32_t id) {
  return allocate(tiling(rows, cols, dt, run, id), hint);
}

Tiles LoweringContext::tiling(int64_t rows, int64_t cols, DType dt, int64_t run, int32_t id) const {
  Tiles v;
  v.rows = rows;
  v.cols = cols;
  v.dtype = dt;
  if (run <= 0) run = std::max<int64_t>(rows, 1);
  for (int64_t r0 = 0; r0 < rows; r0 += run) {
    for (int64_t r = r0; r < std::min(rows, r0 + run); r += m_tile_rows) {
      v.starts.push_back(r);
      v.counts.push_back(
          static_cast<int32_t>(std::min<int64_t>(m_tile_rows, std::min(rows, r0 + run) - r)));
    }
  }
  if (m_window && m_window->ids.count(id)) v = v.window(m_window->t0, m_window->t1);
  v.cols = window_cols(id, v.cols);
  if (m_window && m_window->own.count(id)) {
    const auto [t0, t1] = m_window->own.at(id);
    v = v.window(t0, t1);
  }
  return v;
}

int64_t LoweringContext::window_cols(int32_t id, int64_t cols) const {
  if (!m_window || m_window->cols == 0 || id < 0 || !m_graph.find(id)) return cols;
  if (!m_window->col_ids.count(id)) return cols;
  if (view_of(type_of(id)).cols != cols) return cols;  // a column vector, say
  return std::min(m_window->cols, cols - m_window->c0);
}

int64_t LoweringContext::window_col0(int32_t id) const {
  const int64_t full = id >= 0 && m_graph.find(id) ? view_of(type_of(id)).cols : 0;
  return window_cols(id, full) == full ? 0 : m_window->c0;
}

std::optional<Tiles> LoweringContext::new_tiles_like(const Tiles& like, int64_t cols, DType dt,
                                                     const std::string& hint) {
  Tiles v = like;
  v.cols = cols;
  v.dtype = dt;
  v.col_base = 0;
  v.tiles.clear();
  return allocate(v, hint);
}

std::optional<Tiles> LoweringContext::allocate(Tiles v, const std::string& hint) {
  const int64_t cols = v.cols;
  const DType dt = v.dtype;
  for (size_t t = 0; t < v.starts.size(); ++t) {
    auto s = sbuf_alloc(cols * isa::dtype_bytes(dt), hint);
    if (!s) {
      for (Slot x : v.tiles) m_sbuf.release(x);
      return std::nullopt;
    }
    v.tiles.push_back(*s);
  }
  return v;
}

std::optional<Tiles> LoweringContext::scratch(int64_t cols) {
  return new_tiles(m_tile_rows, cols, DType::fp32, "tmp");
}

std::optional<Tiles> LoweringContext::output_tiles(const Node& n, const Tiles* like) {
  View v = view_of(n.type);
  v.cols = window_cols(n.id, v.cols);
  const std::string hint = "v" + std::to_string(n.id);
  auto t = like && like->rows == v.rows
               ? new_tiles_like(*like, v.cols, n.type.dtype, hint)
               : new_tiles(v.rows, v.cols, n.type.dtype, hint, run_of(n.type), n.id);
  if (t) m_tiles[n.id] = *t;
  return t;
}

const Tiles* LoweringContext::like_of(const Node& n) {
  const int64_t rows = view_of(n.type).rows;
  for (int32_t in : n.inputs) {
    if (view_of(type_of(in)).rows != rows) continue;
    if (!tiles_of(in)) return nullptr;
    return &m_tiles.at(in);
  }
  return nullptr;
}

std::optional<Tiles> LoweringContext::tiles_of(int32_t id,
                                               const std::function<void(int64_t, int64_t)>& after) {
  auto it = m_tiles.find(id);
  if (it != m_tiles.end()) return it->second;
  auto view = m_views.find(id);
  if (view != m_views.end()) {
    auto tiles = load_view(view->second, type_of(id).dtype, id);
    if (tiles) m_tiles[id] = *tiles;
    return tiles;
  }
  const Node& n = node(id);
  const View v = view_of(n.type);
  auto tiles = new_tiles(v.rows, v.cols, n.type.dtype, "in", run_of(n.type), id);
  if (!tiles) return std::nullopt;
  Slot src = hbm_tensor(id, isa::TensorRole::input);
  const int64_t c0 = window_col0(id), cols = tiles->cols;
  for (int64_t t = 0; t < tiles->count(); ++t) {
    copy_rows(true, tile_ap(*tiles, t, 0, cols),
              hbm_ap(src, n.type.dtype, v, tiles->row0(t), tiles->rows_in(t), c0, cols));
    if (after) after(t, tiles->count());
  }
  m_bytes_in += tiles->stored_rows() * cols * isa::dtype_bytes(n.type.dtype);
  m_tiles[id] = *tiles;
  return tiles;
}

std::optional<Tiles> LoweringContext::interleaved_tiles_of(int32_t id, int64_t kt) {
  auto it = m_tiles.find(id);
  if (it != m_tiles.end()) return it->second;
  const Node& n = node(id);
  const View v = view_of(n.type);
  const int64_t row_bytes = v.cols * isa::dtype_bytes(n.type.dtype);
  // Rows per partition: the fewest that make a chunk of dma_min_chunk_bytes, so that a K chunk
  // of B needs the fewest of A's columns (the matmul that makes A can still be finishing).
  int64_t g = 1;
  while (g < kt && (kt % g != 0 || g * row_bytes < m_options.dma_min_chunk_bytes)) ++g;
  // B's bytes as [K / g x g * N]: row tiles of that, loaded as any row tiles are.
  const View packed{v.rows / g, g * v.cols};
  auto tiles = new_tiles(packed.rows, packed.cols, n.type.dtype, "in");
  if (!tiles) return std::nullopt;
  tiles->k_group = g;
  const Slot src = hbm_tensor(id, isa::TensorRole::input);
  // Each tile by g blocks of partitions: as many descriptors, over as many queues, as plain row
  // tiles would take, each chunk g rows long.
  for (int64_t t = 0; t < tiles->count(); ++t) {
    const int32_t rows = tiles->rows_in(t);
    const int64_t pieces = std::min<int64_t>(g, rows);
    for (int64_t p = 0; p < pieces; ++p) {
      const auto r0 = static_cast<int32_t>(rows * p / pieces);
      const auto r1 = static_cast<int32_t>(rows * (p + 1) / pieces);
      AccessPattern dst = tile_ap(*tiles, t, 0, packed.cols);
      dst.partition_start += r0;
      dst.partitions = r1 - r0;
      copy_rows(true, dst,
                hbm_ap(src, n.type.dtype, packed, tiles->row0(t) + r0, r1 - r0, 0, packed.cols));
    }
  }
  m_bytes_in += v.rows * row_bytes;
  m_tiles[id] = *tiles;
  return tiles;
}

std::optional<Tiles> LoweringContext::load_tiles(int32_t id, int64_t t0, int64_t t1) {
  const std::optional<Window> outer = m_window;
  m_window = Window{{id}, t0, t1, {}, {}, 0, 0};
  auto tiles = tiles_of(id);
  m_tiles.erase(id);
  m_window = outer;
  return tiles;
}

std::optional<Tiles> LoweringContext::replicated(int32_t id) {
  auto it = m_replicated.find(id);
  if (it != m_replicated.end()) return it->second;
  if (m_tiles.count(id)) return std::nullopt;  // on chip: no partition broadcast
  if (!ensure_hbm(id)) return std::nullopt;    // a view (a reshaped weight) gets its own tensor
  const Node& n = node(id);
  const View v = view_of(n.type);
  const int64_t c0 = window_col0(id), cols = window_cols(id, v.cols);
  auto tiles = new_tiles(m_tile_rows, cols, n.type.dtype, "bcast");
  if (!tiles) return std::nullopt;
  Slot src = hbm_tensor(id, isa::TensorRole::input);
  AccessPattern s = hbm_ap(src, n.type.dtype, v, 0, m_tile_rows, c0, cols);
  s.partition_stride = 0;
  dma(next_load_queue(), tile_ap(*tiles, 0, 0, cols), s);
  m_bytes_in += cols * isa::dtype_bytes(n.type.dtype);
  m_replicated[id] = *tiles;
  return tiles;
}

bool LoweringContext::store(int32_t id, isa::TensorRole role) {
  if (!m_tiles.count(id) && m_views.count(id) && copy_view(id, role)) return true;
  if (!m_tiles.count(id) && !tiles_of(id)) return false;
  const Tiles& v = m_tiles.at(id);
  const Node& n = node(id);
  Slot dst = hbm_tensor(id, role);
  const bool narrowed = m_window && m_window->cols > 0 && m_window->col_ids.count(id);
  const int64_t c0 = narrowed ? m_window->c0 : 0;
  const View view{v.rows, narrowed ? view_of(n.type).cols : v.cols};
  // A plan output's last row tiles are stored as the plan ends: nothing after them overlaps
  // their stores, and each, one piece of up to dma_split_bytes on one engine, outlasts the
  // compute of the tiles after it (trn2 1024^3: a 256 KiB row tile 12 us on one queue, the
  // last 8 tiles' stores the plan's last 12 us). The last as many tiles as there are store
  // queues, when one would be a single piece, are cut as finely as a load that waits for
  // compute, over the store queues; the ones before stay whole (cut finer, a DMA-bound plan's
  // many stores only cost descriptors), and so do tiles already cut over several engines.
  // (In row windows the value's last rows, not each window's.) The matmul family's only: its
  // row tiles complete together, in the last column block, where another op's complete one by
  // one as their loads land and their stores overlap the next tiles' work.
  const bool matmul = n.op == OpKind::matmul || n.op == OpKind::batch_matmul;
  const int64_t tail =
      view_of(n.type).rows - queues().store_queue_count() * static_cast<int64_t>(m_tile_rows);
  for (int64_t t = 0; t < v.count(); ++t) {
    const bool last =
        role == isa::TensorRole::output && matmul && v.row0(t) >= tail &&
        v.rows_in(t) * v.cols * isa::dtype_bytes(n.type.dtype) <= m_options.dma_split_bytes;
    copy_rows(false, hbm_ap(dst, n.type.dtype, view, v.row0(t), v.rows_in(t), c0, v.cols),
              tile_ap(v, t, 0, v.cols), last);
  }
  m_bytes_out += v.stored_rows() * v.cols * isa::dtype_bytes(n.type.dtype);
  m_in_hbm.insert(id);
  return true;
}

bool LoweringContext::ensure_hbm(int32_t id) {
  if (m_in_hbm.count(id) || !m_group_ids.count(id) || node(id).op == OpKind::input) return true;
  return store(id, isa::TensorRole::scratch);
}

LowerResult LoweringContext::operand(int32_t id, const Tiles& out, Bcast& how,
                                     std::optional<Tiles>& tiles) {
  View v = view_of(type_of(id));
  v.cols = window_cols(id, v.cols);
  if (v.rows == out.rows && (v.cols == out.cols || v.cols == 1)) {
    how = v.cols == 1 && out.cols != 1 ? Bcast::column : Bcast::none;
    tiles = tiles_of(id);
    if (tiles && !tiles->same_tiling(out)) {
      // Tiled otherwise (a view loaded in runs): through HBM, reloaded with the output's tiling.
      if (in_window() || !ensure_hbm(id)) return error("operands are tiled differently");
      auto again = new_tiles_like(out, v.cols, type_of(id).dtype, "retile");
      if (!again) return no_room();
      Slot src = hbm_tensor(id, isa::TensorRole::input);
      for (int64_t t = 0; t < again->count(); ++t) {
        copy_rows(true, tile_ap(*again, t, 0, v.cols),
                  hbm_ap(src, type_of(id).dtype, v, again->row0(t), again->rows_in(t), 0, v.cols));
      }
      m_bytes_in += again->stored_rows() * v.cols * isa::dtype_bytes(type_of(id).dtype);
      release(*tiles);
      tiles = m_tiles[id] = *again;
    }
  } else if (v.rows > 1 && out.rows % v.rows == 0 && v.cols == out.cols) {
    how = Bcast::batch;  // repeats along the leading (batch) dims
    tiles = tiles_of(id);
    if (tiles) {
      for (int64_t t = 0; t < out.count(); ++t) {
        const int64_t k = t % tiles->count();
        if (out.row0(t) % v.rows != tiles->row0(k) || out.rows_in(t) != tiles->rows_in(k)) {
          return error("a batch broadcast whose tiles do not line up");
        }
      }
    }
  } else if (v.rows == 1 && (v.cols == out.cols || v.cols == 1)) {
    how = v.cols == 1 ? Bcast::scalar : Bcast::row;
    tiles = replicated(id);
    if (!tiles && m_tiles.count(id)) {
      return error("broadcasting an on-chip row vector across partitions is not supported yet");
    }
  } else {
    return error("this broadcast is not supported by the lowering yet");
  }
  if (!tiles) return no_room();
  return std::nullopt;
}

AccessPattern LoweringContext::operand_ap(const Tiles& v, Bcast how, int64_t t, int64_t c0,
                                          int64_t nc, int32_t rows) const {
  switch (how) {
    case Bcast::none:
      return tile_ap(v, t, c0, nc);
    case Bcast::batch:
      return tile_ap(v, t % v.count(), c0, nc);
    case Bcast::column:
      return broadcast_column(tile_ap(v, t, 0, 1), nc);
    case Bcast::row: {
      AccessPattern ap = tile_ap(v, 0, c0, nc);
      ap.partitions = rows;
      return ap;
    }
    case Bcast::scalar: {
      AccessPattern ap = broadcast_column(tile_ap(v, 0, 0, 1), nc);
      ap.partitions = rows;
      return ap;
    }
  }
  return {};
}

// Weight prefetch. Weight loads wait for nothing but SBUF room, yet a load is emitted when its
// op is lowered, so in the in-order DMA queues it sits behind the loads of the ops before it,
// some of which wait for compute (bytes just freed by the op before them). So after each op,
// the matmul weights (graph inputs loaded whole, their B) of the next ops are loaded now, in
// order, while they fit beside a reserve of compiler.prefetch_reserve_percent of SBUF kept free
// for the ops' own values, up to compiler.prefetch_ops ops ahead. Their tiles stay on chip
// until their matmul, which finds them there; their DMA is counted to that matmul.
void LoweringContext::prefetch_weights(int position) {
  if (m_options.prefetch_ops <= 0) return;
  const int64_t reserve = sbuf_share(m_options.prefetch_reserve_percent);
  const int last = std::min<int>(static_cast<int>(m_order.size()) - 1,
                                 position + static_cast<int>(m_options.prefetch_ops));
  const int32_t current = current_node();
  for (int k = position + 1; k <= last; ++k) {
    const Node& n = node(m_order[static_cast<size_t>(k)]);
    if (n.op != OpKind::matmul || n.inputs.size() < 2) continue;
    const int32_t b = n.inputs[1];
    const Node& bn = node(b);
    if (bn.op != OpKind::input || on_chip(b) || is_view(b) || streams_b(*this, n)) continue;
    // Only where B's load outweighs the matmul: one row tile of A. With more rows the array
    // works longer than B takes to load, and the room is the row windows'.
    if (view_of(type_of(n.inputs[0])).rows > m_tile_rows) continue;
    if (m_options.matmul_schedule != -2 && im2col_fed(*this, n.inputs[0])) continue;
    const View v = view_of(bn.type);
    const Tiles t = tiling(v.rows, v.cols, bn.type.dtype, run_of(bn.type));
    const int64_t bytes =
        t.count() * SbufAllocator::aligned(v.cols * isa::dtype_bytes(bn.type.dtype));
    if (m_sbuf.free_bytes() - bytes < reserve) break;  // in order: no later weight jumps ahead
    begin_prefetch(n.id, k);
    const int64_t kt = k_interleave(*this, n);
    const bool ok = (kt > 0 ? interleaved_tiles_of(b, kt) : tiles_of(b)).has_value();
    end_prefetch(current);
    if (!ok) break;
  }
}

LowerResult LoweringContext::needs_one_chunk(int64_t cols) const {
  if (cols <= free_chunk()) return std::nullopt;
  return error("the last axis (" + std::to_string(cols) + ") exceeds one vector instruction (" +
               std::to_string(free_chunk()) + "); chunked reductions are not implemented yet");
}

std::optional<int32_t> LoweringContext::plan_scalar(const std::string& name) {
  auto it = m_scalars.find(name);
  if (it != m_scalars.end()) return it->second;
  const ScalarParam* p = m_graph.find_scalar(name);
  if (!p) return std::nullopt;
  const int32_t index = builder().add_scalar(p->name, p->min, p->max);
  m_scalars[name] = index;
  return index;
}

}  // namespace wallsim::compiler_stub::lowering
