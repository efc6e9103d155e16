// LoweringContext: storage and tiling of values, loads and stores, access patterns, DMA and
// emit helpers. Row windows, spilling and views are in their own files.
#include "lowering/lowering_context.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace wallsim::compiler_stub::lowering {

View view_of(const TensorType& t) {
  View v;
  if (t.dims.empty()) return v;
  v.cols = t.dims.back().size;
  for (size_t i = 0; i + 1 < t.dims.size(); ++i) v.rows *= t.dims[i].size;
  return v;
}

int64_t run_of(const TensorType& t) {
  return t.dims.size() >= 3 ? t.dims[t.dims.size() - 2].size : 0;
}

Tiles Tiles::window(int64_t t0, int64_t t1) const {
  Tiles w = *this;
  w.starts.assign(starts.begin() + t0, starts.begin() + t1);
  w.counts.assign(counts.begin() + t0, counts.begin() + t1);
  if (!tiles.empty()) w.tiles.assign(tiles.begin() + t0, tiles.begin() + t1);
  return w;
}

namespace {
int32_t tile_rows_for(const isa::ArchSpec& a) {
  return std::min({a.sbuf.partitions, a.psum.partitions, a.tensor.rows, a.tensor.cols});
}
}  // namespace

LoweringContext::LoweringContext(const Graph& graph, const std::vector<int32_t>& group,
                                 const GraphUses& uses, const isa::ArchSpec& arch,
                                 const LoweringOptions& options, const std::string& plan_name)
    : m_graph(graph),
      m_arch(arch),
      m_options(options),
      m_group_ids(group.begin(), group.end()),
      m_builder(plan_name),
      m_sbuf(m_builder, tile_rows_for(arch), arch.sbuf.bytes_per_partition),
      m_tile_rows(tile_rows_for(arch)),
      m_vector_cost_percent(vector_cost_percent(arch.costs)) {
  // The group's values read after it: graph outputs, and values with a consumer outside the
  // group (time proportional to the group's uses, not to the graph).
  for (int32_t id : group) {
    const auto& readers = uses.consumers(id);
    if (uses.is_output(id) || std::any_of(readers.begin(), readers.end(),
                                          [&](int32_t r) { return !m_group_ids.count(r); })) {
      m_used_outside.insert(id);
    }
  }
  // Loads and stores on separate queues, so a store waiting for a result never holds up the
  // prefetch behind it. The queues cover every DMA engine (several queues share an engine, so
  // one queue's descriptor issue overlaps another's transfer); each transfer goes to the least
  // loaded engine (next_load_queue).
  const int64_t engines = arch.dma.engines;
  // Counts per engine, so that a chip with more (or fewer) DMA engines keeps the same queues on
  // each: a fixed count would leave the two load classes below sharing queues on some engines.
  const int64_t queues_max = arch.dma.queues_max();
  const int64_t stores =
      std::max<int64_t>(1, std::min(options.store_queues_per_engine * engines, queues_max - 1));
  const int64_t loads =
      std::max<int64_t>(1, std::min(options.load_queues_per_engine * engines, queues_max - stores));
  m_engine_bytes.assign(static_cast<size_t>(engines), 0);
  auto add_queue = [&](const std::string& name, int64_t engine) {
    const int q = m_builder.add_queue(name, static_cast<int32_t>(engine));
    const auto size = std::max(m_queue_engine.size(), static_cast<size_t>(q) + 1);
    m_queue_engine.resize(size, -1);
    m_queue_bytes.resize(size, 0);
    m_queue_serves.resize(size, kNoLoad);
    m_queue_engine[static_cast<size_t>(q)] = static_cast<int>(engine);
    return q;
  };
  // Two classes only where each reaches every engine: with fewer load queues than twice the
  // engines (tiny: 4 of 8 queues load, over 4 engines), plan-input loads would reach half the
  // engines while the other half carries only stores and reloads.
  const int64_t prefetch = loads >= 2 * engines ? (loads + 1) / 2 : loads;
  for (int64_t q = 0; q < loads; ++q) {
    (q < prefetch ? m_load_queues : m_dependent_load_queues)
        .push_back(add_queue("ld" + std::to_string(q), q % engines));
  }
  if (m_dependent_load_queues.empty()) m_dependent_load_queues = m_load_queues;
  for (int64_t q = 0; q < stores; ++q) {
    m_store_queues.push_back(add_queue("st" + std::to_string(q), (loads + q) % engines));
  }
  const int banks = static_cast<int>(arch.psum.bytes_per_partition / arch.psum.bank_bytes);
  for (int k = 0; k < banks; ++k) {
    m_psum_banks.push_back(m_builder.add_buffer(
        MemSpace::psum, 0, m_tile_rows, k * arch.psum.bank_bytes, arch.psum.bank_bytes, "psum"));
  }
}

void LoweringContext::index_uses(const std::vector<int32_t>& order) {
  m_order = order;
  for (size_t i = 0; i < order.size(); ++i) {
    for (int32_t in : m_graph.find(order[i])->inputs) {
      m_last_use[in] = static_cast<int>(i);
      m_uses[in].push_back(static_cast<int>(i));
    }
    for (int32_t in : spliced_reads(*this, *m_graph.find(order[i]))) {  // lower_attention.cpp
      m_last_use[in] = static_cast<int>(i);
      m_uses[in].push_back(static_cast<int>(i));
    }
  }
}

void LoweringContext::begin_node(const Node& n, int position) {
  m_current_node = n.id;
  m_position = position;
  m_lane_busy[0] = m_lane_busy[1] = 0;  // evacuate() balances the lane engines within an op
  m_pinned = {n.id};
  m_pinned.insert(n.inputs.begin(), n.inputs.end());
  m_builder.add_node(n.id, n.name.empty() ? value_name(m_graph, n.id) : n.name,
                     std::string(info(n.op).name));
  // What the op needs, as it starts: a "does not fit" error reports these, not the state
  // after some operands were loaded (they would look resident and cost nothing).
  m_need.reset();
  if (info(n.op).row_window != RowWindow::none) {
    const auto [per_tile, fixed] = footprint(n);
    m_need = Need{per_tile, fixed, pinned_bytes(n)};
  }
}

void LoweringContext::release_dead(int position) {
  // Read by no op after `position` (the value itself; views are tracked by their own ids).
  auto dead_after = [&](int32_t id) {
    auto lu = m_last_use.find(id);
    return lu == m_last_use.end() || lu->second <= position;
  };
  std::vector<int32_t> dead;
  for (const auto& [id, tiles] : m_tiles) {
    if (dead_after(id)) dead.push_back(id);
  }
  for (int32_t id : dead) {
    for (Slot s : m_tiles[id].tiles) m_sbuf.release(s);
    m_tiles.erase(id);
  }
  // Scratch tensors whose values (and views of them) are all dead return to the pool.
  for (auto it = m_scratch_owners.begin(); it != m_scratch_owners.end();) {
    bool dead = true;
    for (int32_t id : it->second) dead = dead && !live_after(id, position);
    if (!dead) {
      ++it;
      continue;
    }
    const Slot s{MemSpace::hbm, it->first};
    m_free_scratch[type_of(*it->second.begin()).dtype].push_back(s);
    for (int32_t id : it->second) m_hbm_tensors.erase(id);
    it = m_scratch_owners.erase(it);
  }
  for (auto it = m_replicated.begin(); it != m_replicated.end();) {
    if (!dead_after(it->first)) {
      ++it;
      continue;
    }
    for (Slot s : it->second.tiles) m_sbuf.release(s);
    it = m_replicated.erase(it);
  }
  for (auto it = m_forms.begin(); it != m_forms.end();) {  // derived_forms.cpp
    if (!dead_after(it->first.first)) {
      ++it;
      continue;
    }
    m_sbuf.release(it->second.slot);
    it = m_forms.erase(it);
  }
}

LowerStats LoweringContext::stats() const {
  LowerStats s;
  s.sbuf_peak_bytes = m_sbuf.peak();
  s.hbm_bytes_in = m_bytes_in;
  s.hbm_bytes_out = m_bytes_out;
  s.spills = m_spills;
  s.spill_bytes = m_spill_bytes;
  return s;
}

CompileError LoweringContext::error(const std::string& reason) const {
  const Node* n = m_graph.find(m_current_node);
  return {m_current_node, n ? std::string(info(n->op).name) : "?", reason};
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

// ---- storage ----
Slot LoweringContext::hbm_tensor(int32_t id, isa::TensorRole role) {
  auto it = m_hbm_tensors.find(id);
  if (it != m_hbm_tensors.end()) return it->second;
  const Node& n = node(id);
  if (role == isa::TensorRole::scratch && !needed_outside(id)) {
    // Scratch of a dead value is reused: the smallest free tensor of the dtype that is large
    // enough, else the largest, widened. The builder orders the new writes after the old
    // value's readers (its byte-range hazards).
    auto& pool = m_free_scratch[n.type.dtype];
    const int64_t need = n.type.elements();
    auto pick = pool.end();
    for (auto p = pool.begin(); p != pool.end(); ++p) {
      const int64_t have = m_builder.tensor_elements(*p);
      if (pick == pool.end()) {
        pick = p;
        continue;
      }
      const int64_t best = m_builder.tensor_elements(*pick);
      if (have >= need ? (best < need || have < best) : (best < need && have > best)) pick = p;
    }
    if (pick != pool.end()) {
      Slot s = *pick;
      pool.erase(pick);
      if (m_builder.tensor_elements(s) < need) m_builder.grow_tensor(s, need);
      m_hbm_tensors[id] = s;
      m_scratch_owners[s.index].insert(id);
      return s;
    }
  }
  std::vector<int64_t> shape;
  for (const Dim& d : n.type.dims) shape.push_back(d.size);
  Slot s = m_builder.add_tensor(value_name(m_graph, id), MemSpace::hbm, n.type.dtype, shape, role);
  m_hbm_tensors[id] = s;
  if (role == isa::TensorRole::scratch && !needed_outside(id)) m_scratch_owners[s.index] = {id};
  return s;
}

void LoweringContext::alias_hbm(int32_t id, Slot tensor) {
  m_hbm_tensors[id] = tensor;
  m_in_hbm.insert(id);
  if (auto o = m_scratch_owners.find(tensor.index); o != m_scratch_owners.end()) {
    if (needed_outside(id)) {
      m_scratch_owners.erase(o);  // never reused
    } else {
      o->second.insert(id);
    }
  }
}

bool LoweringContext::live_after(int32_t id, int position) const {
  auto lu = m_last_use.find(id);
  if (lu != m_last_use.end() && lu->second > position) return true;
  for (const auto& [view, desc] : m_views) {
    if (desc.base == id && view != id && live_after(view, position)) return true;
  }
  return false;
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

std::optional<Tiles> LoweringContext::tiles_of(int32_t id) {
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
  for (int64_t t = 0; t < v.count(); ++t) {
    copy_rows(false, hbm_ap(dst, n.type.dtype, view, v.row0(t), v.rows_in(t), c0, v.cols),
              tile_ap(v, t, 0, v.cols));
  }
  m_bytes_out += v.stored_rows() * v.cols * isa::dtype_bytes(n.type.dtype);
  m_in_hbm.insert(id);
  return true;
}

bool LoweringContext::ensure_hbm(int32_t id) {
  if (m_in_hbm.count(id) || !m_group_ids.count(id) || node(id).op == OpKind::input) return true;
  return store(id, isa::TensorRole::scratch);
}

void LoweringContext::release(const Tiles& t) {
  for (Slot s : t.tiles) m_sbuf.release(s);
}

void LoweringContext::release_held() {
  for (Slot s : m_held) m_sbuf.release(s);
  m_held.clear();
  for (const auto& k : m_kept) m_sbuf.release(k.first);
  m_kept.clear();
}

std::optional<Slot> LoweringContext::take_kept(int64_t bytes) {
  for (auto it = m_kept.begin(); it != m_kept.end(); ++it) {
    if (it->second != bytes) continue;
    const Slot s = it->first;
    m_kept.erase(it);
    return s;
  }
  return std::nullopt;
}

// ---- access patterns ----
AccessPattern LoweringContext::sbuf_ap(Slot s, DType dt, int32_t parts, int64_t offset,
                                       int64_t cols) {
  AccessPattern ap;
  ap.space = MemSpace::sbuf;
  ap.buffer = s.index;
  ap.dtype = dt;
  ap.partitions = parts;
  ap.offset = offset;
  ap.num_free = 1;
  ap.free[0] = {cols, 1};
  return ap;
}

AccessPattern LoweringContext::hbm_ap(Slot s, DType dt, const View& view, int64_t row0,
                                      int32_t rows, int64_t col0, int64_t ncols) {
  AccessPattern ap;
  ap.space = MemSpace::hbm;
  ap.buffer = s.index;
  ap.dtype = dt;
  ap.partitions = rows;
  ap.partition_stride = view.cols;
  ap.offset = row0 * view.cols + col0;
  ap.num_free = 1;
  ap.free[0] = {ncols, 1};
  return ap;
}

AccessPattern LoweringContext::psum_ap(Slot bank, int32_t partitions, int64_t cols,
                                       int64_t offset) {
  AccessPattern ap;
  ap.space = MemSpace::psum;
  ap.buffer = bank.index;
  ap.dtype = DType::fp32;
  ap.partitions = partitions;
  ap.offset = offset;
  ap.num_free = 1;
  ap.free[0] = {cols, 1};
  return ap;
}

AccessPattern LoweringContext::broadcast_column(AccessPattern col, int64_t ncols) {
  col.num_free = 1;
  col.free[0] = {ncols, 0};
  return col;
}

AccessPattern LoweringContext::ids_ap(Slot ids, const Tiles& rows, int64_t t) {
  AccessPattern a;
  a.space = MemSpace::hbm;
  a.buffer = ids.index;
  a.dtype = DType::int32;
  a.partitions = rows.rows_in(t);
  a.partition_stride = 1;
  a.offset = rows.row0(t);
  return a;
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

// ---- DMA ----
void LoweringContext::copy_rows(bool load, AccessPattern dst, AccessPattern src) {
  const std::vector<int>& queues = load ? m_load_queues : m_store_queues;
  // A load of a value the plan writes waits for compute and is waited for (a KV cache after
  // its update): it is cut finer, over more engines, so that its latency is short.
  const bool dependent =
      load && src.space == MemSpace::hbm && m_builder.role(src.buffer) != isa::TensorRole::input;
  const int64_t split =
      dependent ? std::min(m_options.dma_dependent_split_bytes, m_options.dma_split_bytes)
                : m_options.dma_split_bytes;
  const int64_t cols = dst.free[0].size;
  const int64_t bytes = int64_t(dst.partitions) * cols * isa::dtype_bytes(dst.dtype);
  const int64_t want =
      std::min<int64_t>(static_cast<int64_t>(queues.size()), (bytes + split - 1) / split);
  int64_t pieces = want;
  const bool plain = dst.num_free == 1 && src.num_free == 1 && dst.free[0].stride == 1 &&
                     src.free[0].stride == 1 && src.scalar < 0 && dst.scalar < 0;
  if (!plain) pieces = 1;
  // Each piece's rows stay at least dma_min_chunk_bytes long (the DMA charges every chunk).
  const int64_t row_bytes = cols * isa::dtype_bytes(dst.dtype);
  pieces = std::min(pieces, row_bytes / std::max<int64_t>(1, m_options.dma_min_chunk_bytes));
  pieces = std::max<int64_t>(1, std::min(pieces, cols));
  // Rows too short to cut by columns are cut by rows (partitions) instead: the pieces' chunks
  // are the same, only their descriptors are more, and the transfer spreads over the queues.
  const int64_t row_pieces =
      plain ? std::max<int64_t>(1, std::min<int64_t>(want / pieces, dst.partitions)) : 1;
  const int64_t step = (cols + pieces - 1) / pieces;
  const int32_t rows = dst.partitions;
  auto rows_of = [](AccessPattern& ap, int32_t r0, int32_t n) {
    if (ap.space == MemSpace::hbm) {
      ap.offset += int64_t{r0} * ap.partition_stride;
    } else {
      ap.partition_start += r0;
    }
    ap.partitions = n;
  };
  for (int64_t p = 0; p < row_pieces; ++p) {
    const auto r0 = static_cast<int32_t>(rows * p / row_pieces);
    const auto r1 = static_cast<int32_t>(rows * (p + 1) / row_pieces);
    for (int64_t c0 = 0; c0 < cols; c0 += step) {
      AccessPattern d = dst, s = src;
      if (row_pieces > 1) {
        rows_of(d, r0, r1 - r0);
        rows_of(s, r0, r1 - r0);
      }
      d.offset += c0;
      s.offset += c0;
      d.free[0].size = s.free[0].size = std::min(step, cols - c0);
      dma(load ? next_load_queue() : next_store_queue(), d, s);
    }
  }
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
  const int32_t current = m_current_node;
  for (int k = position + 1; k <= last; ++k) {
    const Node& n = node(m_order[static_cast<size_t>(k)]);
    if (n.op != OpKind::matmul || n.inputs.size() < 2) continue;
    const int32_t b = n.inputs[1];
    const Node& bn = node(b);
    if (bn.op != OpKind::input || on_chip(b) || is_view(b) || streams_b(*this, n)) continue;
    // Only where B's load outweighs the matmul: one row tile of A. With more rows the array
    // works longer than B takes to load, and the room is the row windows'.
    if (view_of(type_of(n.inputs[0])).rows > m_tile_rows) continue;
    const View v = view_of(bn.type);
    const Tiles t = tiling(v.rows, v.cols, bn.type.dtype, run_of(bn.type));
    const int64_t bytes =
        t.count() * SbufAllocator::aligned(v.cols * isa::dtype_bytes(bn.type.dtype));
    if (m_sbuf.free_bytes() - bytes < reserve) break;  // in order: no later weight jumps ahead
    m_current_node = n.id;
    m_prefetch_position = k;
    m_prefetching = true;
    const int64_t kt = k_interleave(*this, n);
    const bool ok = (kt > 0 ? interleaved_tiles_of(b, kt) : tiles_of(b)).has_value();
    m_prefetching = false;
    m_prefetched = true;
    m_current_node = current;
    if (!ok) break;
  }
}

int LoweringContext::least_loaded(const std::vector<int>& queues) const {
  int best = queues.front();
  for (int q : queues) {
    const auto qi = static_cast<size_t>(q), bi = static_cast<size_t>(best);
    const int64_t e = m_engine_bytes[static_cast<size_t>(m_queue_engine[qi])];
    const int64_t be = m_engine_bytes[static_cast<size_t>(m_queue_engine[bi])];
    if (e < be || (e == be && m_queue_bytes[qi] < m_queue_bytes[bi])) best = q;
  }
  return best;
}

// A dependent load waits for a result and then is on the op's critical path: its pieces go
// to the engines this op has given the fewest dependent bytes so far, then to the least loaded,
// so one op's reload is spread over every engine instead of following the plan-wide balance
// (which sent a decode step's K/V pieces to the same six engines). The weight loads, placed
// by least_loaded, even the engines out again.
int LoweringContext::spread(const std::vector<int>& queues) {
  if (m_spread_node != m_current_node) {
    m_spread_node = m_current_node;
    m_spread_bytes.assign(m_engine_bytes.size(), 0);
  }
  int best = queues.front();
  auto key = [&](int q) {
    const auto e = static_cast<size_t>(m_queue_engine[static_cast<size_t>(q)]);
    return std::make_tuple(m_spread_bytes[e], m_engine_bytes[e],
                           m_queue_bytes[static_cast<size_t>(q)]);
  };
  for (int q : queues) {
    if (key(q) < key(best)) best = q;
  }
  return best;
}

void LoweringContext::dma(int queue, const AccessPattern& dst, const AccessPattern& src) {
  Instruction in;
  in.op = Opcode::dma_copy;
  in.dst = dst;
  in.src[0] = src;
  emit(queue, in);
}

// ---- emit helpers ----
void LoweringContext::emit(int stream, Instruction in) {
  in.node = m_current_node;
  ++m_emitted;
  if (const Engine e = isa::info(in.op).engine; e == Engine::vector || e == Engine::scalar) {
    // In scalar-engine time: the vector engine's element-cycles weigh m_vector_cost_percent.
    m_lane_busy[e == Engine::vector ? 0 : 1] +=
        lane_cost(in) * (e == Engine::vector ? m_vector_cost_percent : 100);
  }
  if (is_queue(stream) && in.op != Opcode::dma_scatter && in.dst.space != MemSpace::hbm) {
    const bool input = in.src[0].space == MemSpace::hbm &&
                       m_builder.role(in.src[0].buffer) == isa::TensorRole::input;
    // With weights prefetched, a prefetch queue may hold loads for later ops: an input load
    // the current op needs now takes a prefetch queue whose last load is for this op or an
    // earlier one, and only when there is none a dependent-load queue, not a place behind
    // them. (The dependent queues hold loads that wait for stores and compute.)
    if (!input) {
      stream = spread(m_dependent_load_queues);
    } else if (m_prefetched && !m_prefetching) {
      std::vector<int> clear;
      for (int q : m_load_queues) {
        if (m_queue_serves[static_cast<size_t>(q)] <= m_position) clear.push_back(q);
      }
      stream = clear.empty() ? spread(m_dependent_load_queues) : least_loaded(clear);
    }
    m_queue_serves[static_cast<size_t>(stream)] = m_prefetching ? m_prefetch_position : m_position;
  }
  if (is_queue(stream)) {
    const int64_t bytes = in.op == Opcode::dma_scatter ? in.src[0].bytes() : in.dst.bytes();
    const auto engine = static_cast<size_t>(m_queue_engine[static_cast<size_t>(stream)]);
    m_engine_bytes[engine] += bytes;
    if (m_spread_node == m_current_node && !m_spread_bytes.empty()) m_spread_bytes[engine] += bytes;
    m_queue_bytes[static_cast<size_t>(stream)] += bytes;
  }
  m_builder.emit(stream, std::move(in));
}

Instruction LoweringContext::vec(Opcode op, const AccessPattern& dst) {
  Instruction in;
  in.op = op;
  in.dst = dst;
  return in;
}

void LoweringContext::tensor_tensor(AluOp alu, const AccessPattern& dst, const AccessPattern& a,
                                    const AccessPattern& b) {
  Instruction in = vec(Opcode::tensor_tensor, dst);
  in.alu = alu;
  in.src[0] = a;
  in.src[1] = b;
  emit(stream(Engine::vector), in);
}

void LoweringContext::tensor_scalar(AluOp alu, const AccessPattern& dst, const AccessPattern& a,
                                    double s, bool reverse) {
  Instruction in = vec(Opcode::tensor_scalar, dst);
  in.alu = alu;
  in.src[0] = a;
  in.scalar.imm = s;
  in.reverse = reverse;
  emit(stream(Engine::vector), in);
}

void LoweringContext::reduce(AluOp alu, const AccessPattern& dst, const AccessPattern& src) {
  Instruction in = vec(Opcode::tensor_reduce, dst);
  in.alu = alu;
  in.src[0] = src;
  emit(stream(Engine::vector), in);
}

void LoweringContext::activation(ActFn fn, const AccessPattern& dst, const AccessPattern& src,
                                 double scale, double bias, const AccessPattern* accum) {
  Instruction in = vec(accum ? Opcode::activation_reduce : Opcode::activation, dst);
  in.act = fn;
  in.src[0] = src;
  in.scale = scale;
  in.bias = bias;
  if (accum) in.accum = *accum;
  emit(stream(Engine::scalar), in);
}

// The modelled occupancy of a vector or scalar instruction, in element-cycles: the lane
// engines' model (a fixed overhead plus one cycle per element per input, engines/src/
// lane_timing.cpp) at one element per cycle and its trn2 overhead. Only the comparison of the
// two engines' running sums matters; it is deterministic, not a timing.
int64_t LoweringContext::lane_cost(const Instruction& in) {
  int inputs = 0;
  for (int i = 0; i < 3; ++i) inputs += (isa::info(in.op).fields & (isa::F_Src0 << i)) ? 1 : 0;
  const int64_t elements =
      in.op == Opcode::tensor_reduce ? in.src[0].free_elements() : in.dst.free_elements();
  return 100 + std::max(1, inputs) * elements;
}

int64_t LoweringContext::vector_cost_percent(const isa::CostHints& costs) {
  if (costs.vector_elements_per_ns <= 0 || costs.scalar_elements_per_ns <= 0) return 100;
  return std::max<int64_t>(
      1, std::llround(100.0 * costs.scalar_elements_per_ns / costs.vector_elements_per_ns));
}

void LoweringContext::evacuate(const AccessPattern& dst, const AccessPattern& psum,
                               const AccessPattern* add) {
  if (add) {  // only the vector engine adds a tensor on the way out (activation: immediates)
    tensor_tensor(AluOp::add, dst, psum, *add);
    return;
  }
  if (m_lane_busy[0] <= m_lane_busy[1]) {
    Instruction copy = vec(Opcode::tensor_copy, dst);
    copy.src[0] = psum;
    emit(stream(Engine::vector), copy);
  } else {
    activation(ActFn::identity, dst, psum);
  }
}

void LoweringContext::emit_transpose(const AccessPattern& dst, const AccessPattern& src) {
  Instruction tr;
  tr.op = Opcode::transpose;
  tr.dst = dst;
  tr.src[0] = src;
  emit(stream(Engine::tensor), tr);
}

void LoweringContext::emit_matmul(const AccessPattern& dst, const AccessPattern& stationary,
                                  const AccessPattern& moving, bool start, bool stop) {
  Instruction mm;
  mm.op = Opcode::matmul;
  mm.dst = dst;
  mm.src[0] = stationary;
  mm.src[1] = moving;
  mm.start = start;
  mm.stop = stop;
  emit(stream(Engine::tensor), mm);
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
  const int32_t index = m_builder.add_scalar(p->name, p->min, p->max);
  m_scalars[name] = index;
  return index;
}

}  // namespace wallsim::compiler_stub::lowering
