// Lowering a group of graph nodes to one plan: row tiles on partitions, matmuls through the
// array with PSUM accumulation, element-wise and normalisation ops on the vector and scalar
// engines, DMA for what crosses the group's boundary.
#include "wallsim/compiler_stub/lower.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "wallsim/compiler_stub/plan_builder.h"

namespace wallsim::compiler_stub {

using isa::AccessPattern;
using isa::ActFn;
using isa::AluOp;
using isa::DType;
using isa::Engine;
using isa::Instruction;
using isa::MemSpace;
using isa::Opcode;

std::string CompileError::message() const {
  std::string where = node >= 0 ? "node " + std::to_string(node) + " (" + op + ")" : "group";
  return where + ": " + reason;
}

std::string value_name(const Graph& g, int32_t id) {
  const Node* n = g.find(id);
  if (n && n->op == OpKind::input && !n->name.empty()) return n->name;
  // A KV append updates its cache in place: the result is the cache's tensor.
  if (n && (n->op == OpKind::dynamic_update_slice || n->op == OpKind::index_copy) &&
      !n->inputs.empty()) {
    return value_name(g, n->inputs[0]);
  }
  return "v" + std::to_string(id);
}

namespace {

// DMA transfers above this size are split by columns across queues (copy_rows).
constexpr int64_t kSplitBytes = 256 * 1024;

struct View {
  int64_t rows = 1;
  int64_t cols = 1;
};

// Row tiles of a batched value never cross its innermost leading dim (the run).
int64_t run_of(const TensorType& t) {
  return t.dims.size() >= 3 ? t.dims[t.dims.size() - 2].size : 0;
}

View view_of(const TensorType& t) {
  View v;
  if (t.dims.empty()) return v;
  v.cols = t.dims.back().size;
  for (size_t i = 0; i + 1 < t.dims.size(); ++i) v.rows *= t.dims[i].size;
  return v;
}

// An on-chip value viewed as [rows x cols]: row tiles, tile t holding rows
// [starts[t], starts[t] + counts[t]) on partitions 0.. of its own SBUF buffer. Tiles never
// cross a multiple of the tiling's run (the innermost leading dim of a batched value).
struct Tiles {
  int64_t rows = 0;
  int64_t cols = 0;
  DType dtype = DType::fp32;
  std::vector<int64_t> starts;
  std::vector<int32_t> counts;
  std::vector<Slot> tiles;
  int64_t count() const { return static_cast<int64_t>(starts.size()); }
  int64_t stored_rows() const {
    int64_t r = 0;
    for (int32_t c : counts) r += c;
    return r;
  }
  // Tiles [t0, t1) alone: a window of the value.
  Tiles window(int64_t t0, int64_t t1) const {
    Tiles w = *this;
    w.starts.assign(starts.begin() + t0, starts.begin() + t1);
    w.counts.assign(counts.begin() + t0, counts.begin() + t1);
    if (!tiles.empty()) w.tiles.assign(tiles.begin() + t0, tiles.begin() + t1);
    return w;
  }
  int32_t rows_in(int64_t t) const { return counts[t]; }
  int64_t row0(int64_t t) const { return starts[t]; }
  bool same_tiling(const Tiles& o) const { return starts == o.starts && counts == o.counts; }
};

// A strided view of a row-major tensor in HBM (what reshape and transpose produce): one group
// of (size, stride) sub-dims, outermost first, per logical dim.
struct SubDim {
  int64_t size;
  int64_t stride;
};
struct ViewDesc {
  int32_t base = -1;
  int64_t offset = 0;  // elements, where a slice starts
  std::vector<std::vector<SubDim>> groups;
};

// How an operand meets the output's [rows x cols] iteration space.
enum class Bcast { none, row, column, scalar, batch };

// SBUF as one address range per partition, handed out best-fit from free blocks that coalesce
// when released. Every allocation declares a new buffer over its range that inherits the
// ordering history (AccessHistory) of the dead buffers that used the same bytes, so reuse waits
// for exactly their readers and writers.
class SbufAllocator {
 public:
  SbufAllocator(PlanBuilder& b, int32_t partitions, int64_t capacity)
      : m_builder(b), m_partitions(partitions), m_capacity(capacity) {
    m_free[0] = capacity;
  }
  // A buffer of `bytes` per partition, or nothing when no free block is large enough.
  std::optional<Slot> alloc(int64_t bytes, const std::string& hint) {
    const int64_t aligned = std::max<int64_t>(64, (bytes + 63) / 64 * 64);
    // Next fit: the first large-enough block at or after where the last allocation ended,
    // wrapping around. Memory is reused as late as possible, like a ring, so a new buffer
    // rarely has to wait for the readers of the one it replaces.
    auto best = m_free.end();
    for (auto it = m_free.lower_bound(m_cursor); it != m_free.end(); ++it) {
      if (it->second >= aligned) {
        best = it;
        break;
      }
    }
    for (auto it = m_free.begin(); best == m_free.end() && it != m_free.end(); ++it) {
      if (it->second >= aligned) best = it;
    }
    if (best == m_free.end()) return std::nullopt;
    const int64_t offset = best->first, size = best->second;
    m_free.erase(best);
    if (size > aligned) m_free[offset + aligned] = size - aligned;
    AccessHistory inherit;
    for (auto it = first_segment(offset); it != m_history.end() && it->first < offset + aligned;
         ++it) {
      if (it->second.end > offset) inherit.merge(it->second.history);
    }
    Slot s = m_builder.add_buffer(MemSpace::sbuf, 0, m_partitions, offset, aligned, hint, inherit);
    m_live[s.index] = {offset, aligned};
    m_used += aligned;
    m_cursor = offset + aligned;
    m_peak = std::max(m_peak, offset + aligned);
    return s;
  }
  void release(Slot s) {
    auto live = m_live.find(s.index);
    if (live == m_live.end()) return;
    const auto [offset, size] = live->second;
    m_live.erase(live);
    m_used -= size;
    record_history(offset, offset + size, m_builder.history(s));
    auto it = m_free.emplace(offset, size).first;
    auto next = std::next(it);
    if (next != m_free.end() && offset + it->second == next->first) {
      it->second += next->second;
      m_free.erase(next);
    }
    if (it != m_free.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        m_free.erase(it);
      }
    }
  }
  int64_t peak() const { return m_peak; }
  int64_t capacity() const { return m_capacity; }
  int64_t free_bytes() const { return m_capacity - m_used; }

 private:
  struct Segment {
    int64_t end = 0;
    AccessHistory history;
  };
  // The first history segment that may overlap `offset`.
  std::map<int64_t, Segment>::iterator first_segment(int64_t offset) {
    auto it = m_history.upper_bound(offset);
    if (it != m_history.begin()) {
      auto prev = std::prev(it);
      if (prev->second.end > offset) return prev;
    }
    return it;
  }
  // [begin, end) was last used by a buffer with history `h`: it replaces older segments there.
  void record_history(int64_t begin, int64_t end, const AccessHistory& h) {
    auto it = first_segment(begin);
    if (it != m_history.end() && it->first < begin) {  // split the segment straddling begin
      Segment tail = it->second;
      it->second.end = begin;
      it = m_history.emplace(begin, std::move(tail)).first;
    }
    while (it != m_history.end() && it->first < end) {
      if (it->second.end > end) {  // keep the part beyond end
        Segment tail = it->second;
        m_history.emplace(end, std::move(tail));
      }
      it = m_history.erase(it);
    }
    m_history[begin] = {end, h};
  }
  PlanBuilder& m_builder;
  int32_t m_partitions;
  int64_t m_capacity;
  int64_t m_used = 0;
  int64_t m_peak = 0;
  int64_t m_cursor = 0;
  std::map<int64_t, int64_t> m_free;                      // offset -> bytes
  std::map<int64_t, Segment> m_history;                   // offset -> last users of the range
  std::map<int32_t, std::pair<int64_t, int64_t>> m_live;  // buffer -> (offset, bytes)
};

class Lowering {
 public:
  Lowering(const Graph& g, const std::vector<int32_t>& group, const isa::ArchSpec& arch,
           const std::string& name)
      : m_g(g),
        m_group(group.begin(), group.end()),
        m_order(group),
        m_arch(arch),
        m_b(name),
        m_sbuf(m_b, tile_rows_for(arch), arch.sbuf.bytes_per_partition) {
    m_T = tile_rows_for(arch);
    // Loads and stores on separate queues, each queue on its own DMA engine where there are
    // enough: a store waiting for a result never holds up the prefetch behind it.
    const int engines = arch.dma.engines;
    const int stores = std::max(1, std::min(4, engines / 4));
    const int loads = std::max(1, std::min({8, engines - stores, arch.dma.queues_max - stores}));
    for (int q = 0; q < loads; ++q)
      m_load_queues.push_back(m_b.add_queue("ld" + std::to_string(q), q % engines));
    for (int q = 0; q < stores; ++q)
      m_store_queues.push_back(m_b.add_queue("st" + std::to_string(q), (loads + q) % engines));
    const int banks = static_cast<int>(arch.psum.bytes_per_partition / arch.psum.bank_bytes);
    for (int k = 0; k < banks; ++k) {
      m_psum.push_back(m_b.add_buffer(MemSpace::psum, 0, m_T, k * arch.psum.bank_bytes,
                                      arch.psum.bank_bytes, "psum"));
    }
  }

  std::variant<Lowered, CompileError> run() {
    for (int32_t id : m_order) {
      const Node* n = m_g.find(id);
      if (!n) return CompileError{id, "?", "not in the graph"};
      for (const Dim& d : n->type.dims) {
        if (d.kind == Dim::Kind::unknown) {
          return CompileError{id, std::string(info(n->op).name),
                              "an unknown dimension cannot be compiled statically"};
        }
      }
    }
    for (size_t i = 0; i < m_order.size(); ++i) {
      for (int32_t in : m_g.find(m_order[i])->inputs) {
        m_last_use[in] = static_cast<int>(i);
        m_uses[in].push_back(static_cast<int>(i));
      }
    }
    for (size_t i = 0; i < m_order.size(); ++i) {
      const Node& n = *m_g.find(m_order[i]);
      m_node = n.id;
      m_pos = static_cast<int>(i);
      m_pinned = {n.id};
      m_pinned.insert(n.inputs.begin(), n.inputs.end());
      m_b.add_node(n.id, n.name.empty() ? value_name(m_g, n.id) : n.name,
                   std::string(info(n.op).name));
      if (auto err = row_windowed(n) ? lower_in_windows(n) : lower(n)) return *err;
      if (n.op != OpKind::input && needed_outside(n.id) && !m_in_hbm.count(n.id) && !store(n.id)) {
        return load_failure();
      }
      release_dead(static_cast<int>(i));
    }
    Lowered out;
    out.stats.sbuf_peak_bytes = m_sbuf.peak();
    out.stats.hbm_bytes_in = m_bytes_in;
    out.stats.hbm_bytes_out = m_bytes_out;
    out.stats.spills = m_spills;
    out.stats.spill_bytes = m_spill_bytes;
    out.plan = m_b.build();
    out.stats.instructions = out.plan.instruction_count();
    return out;
  }

 private:
  static int32_t tile_rows_for(const isa::ArchSpec& a) {
    return std::min({a.sbuf.partitions, a.psum.partitions, a.tensor.rows, a.tensor.cols});
  }
  CompileError error(const std::string& reason) const {
    const Node* n = m_g.find(m_node);
    return {m_node, n ? std::string(info(n->op).name) : "?", reason};
  }
  bool needed_outside(int32_t id) const {
    if (std::find(m_g.outputs.begin(), m_g.outputs.end(), id) != m_g.outputs.end()) return true;
    for (const Node& n : m_g.nodes) {
      if (m_group.count(n.id)) continue;
      if (std::find(n.inputs.begin(), n.inputs.end(), id) != n.inputs.end()) return true;
    }
    return false;
  }

  // ---- storage ----
  Slot hbm_tensor(int32_t id, isa::TensorRole role) {
    auto it = m_hbm.find(id);
    if (it != m_hbm.end()) return it->second;
    const Node& n = *m_g.find(id);
    std::vector<int64_t> shape;
    for (const Dim& d : n.type.dims) shape.push_back(d.size);
    Slot s = m_b.add_tensor(value_name(m_g, id), MemSpace::hbm, n.type.dtype, shape, role);
    m_hbm[id] = s;
    return s;
  }
  // Tiles of `rows` rows in chunks of at most T that never cross a multiple of `run`.
  // Value `id`, when given and inside the current row window, gets the window's tiles only.
  std::optional<Tiles> new_tiles(int64_t rows, int64_t cols, DType dt, const std::string& hint,
                                 int64_t run = 0, int32_t id = -1) {
    return allocate(tiling(rows, cols, dt, run, id), hint);
  }
  // The row tiling alone, no storage.
  Tiles tiling(int64_t rows, int64_t cols, DType dt, int64_t run = 0, int32_t id = -1) const {
    Tiles v;
    v.rows = rows;
    v.cols = cols;
    v.dtype = dt;
    if (run <= 0) run = std::max<int64_t>(rows, 1);
    for (int64_t r0 = 0; r0 < rows; r0 += run) {
      for (int64_t r = r0; r < std::min(rows, r0 + run); r += m_T) {
        v.starts.push_back(r);
        v.counts.push_back(
            static_cast<int32_t>(std::min<int64_t>(m_T, std::min(rows, r0 + run) - r)));
      }
    }
    if (m_window && m_window->ids.count(id)) v = v.window(m_window->t0, m_window->t1);
    return v;
  }
  std::optional<Tiles> new_tiles_like(const Tiles& like, int64_t cols, DType dt,
                                      const std::string& hint) {
    Tiles v = like;
    v.cols = cols;
    v.dtype = dt;
    v.tiles.clear();
    return allocate(v, hint);
  }
  std::optional<Tiles> allocate(Tiles v, const std::string& hint) {
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
  CompileError no_room() const {
    if (m_load_error) return error(*m_load_error);
    return error("the op's working set does not fit in SBUF (" +
                 std::to_string(m_arch.sbuf.bytes_per_partition) +
                 " bytes per partition) even with every other value spilled to HBM");
  }

  // ---- row windows: ops too large for SBUF run a few row tiles at a time ----
  // An op whose output row tile t needs only row tile t of its operands with as many rows (and
  // whole smaller operands: weights, biases, masks) can run over windows of consecutive row
  // tiles. Each window loads its rows, computes, stores its output rows to HBM and frees them:
  // the op streams through HBM instead of failing, and its output is spilled (counted).
  static bool row_local(OpKind op) {
    switch (op) {
      case OpKind::input:
      case OpKind::transpose:
      case OpKind::reshape:
      case OpKind::dynamic_update_slice:
      case OpKind::index_copy:
      case OpKind::decode_attention:
      case OpKind::slice:
      case OpKind::concat:
        return false;
      default:
        return true;
    }
  }
  // Operands whose row tile t is all that output row tile t needs: A of a matmul, or any
  // operand with as many rows as the output.
  bool row_aligned(const Node& n, size_t k) const {
    if (n.op == OpKind::matmul || n.op == OpKind::batch_matmul) return k == 0;
    return view_of(m_g.find(n.inputs[k])->type).rows == view_of(n.type).rows;
  }
  int64_t value_bytes_per_tile(int32_t id) const {
    const TensorType& t = m_g.find(id)->type;
    return view_of(t).cols * isa::dtype_bytes(t.dtype);
  }
  // Bytes per partition, per output row tile and fixed, that `n` needs if nothing is resident.
  std::pair<int64_t, int64_t> footprint(const Node& n) const {
    int64_t per_tile = value_bytes_per_tile(n.id), fixed = 0;
    // A gather: its ids and table stay in HBM; each output tile needs its ids' tile.
    if (n.op == OpKind::embedding) return {per_tile + 4, 0};
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const int32_t in = n.inputs[k];
      const bool aligned = row_aligned(n, k);
      if (m_tiles.count(in) && aligned) continue;  // resident: nothing new per tile
      if (aligned) {
        per_tile += value_bytes_per_tile(in);
      } else if (n.op == OpKind::batch_matmul && k == 1 && bmm_chunk_entries(n)) {
        fixed += m_sbuf.capacity() / 4;  // a chunk of B's batch entries at a time
      } else if (!m_tiles.count(in) && !(n.op == OpKind::matmul && k == 1 && streams_b(n))) {
        fixed += value_bytes_per_tile(in) * tiling(view_of(m_g.find(in)->type).rows, 1, DType::fp32,
                                                   run_of(m_g.find(in)->type))
                                                .count();
      }
    }
    const int64_t cols = view_of(n.type).cols;
    if (n.op == OpKind::softmax || n.op == OpKind::log_softmax) fixed += cols * 4 + 64;
    if (n.op == OpKind::layernorm || n.op == OpKind::rmsnorm) fixed += 2 * cols * 4 + 64;
    if (n.op == OpKind::matmul || n.op == OpKind::batch_matmul) {
      const TensorType& a = m_g.find(n.inputs[0])->type;
      per_tile += view_of(a).cols * isa::dtype_bytes(a.dtype);  // A^T stationaries
      if (n.op == OpKind::matmul && streams_b(n)) {
        const int64_t blocks =
            (view_of(m_g.find(n.inputs[1])->type).cols + panel_cols(n) - 1) / panel_cols(n);
        fixed += std::min<int64_t>(2, blocks) * panel_bytes(n);
      }
    }
    return {per_tile, fixed};
  }
  int64_t tile_count(const Node& n) const {
    return tiling(view_of(n.type).rows, 1, DType::fp32, run_of(n.type)).count();
  }
  bool row_windowed(const Node& n) const {
    if (!row_local(n.op) || tile_count(n) < 2) return false;
    const auto [per_tile, fixed] = footprint(n);
    return per_tile * tile_count(n) + fixed > m_sbuf.capacity() / 2;
  }
  std::optional<CompileError> lower_in_windows(const Node& n) {
    const int64_t tiles = tile_count(n);
    const auto [per_tile, fixed] = footprint(n);
    // Windows hold whole runs (batches) so batch-broadcast operands line up; a batch_matmul has
    // none (B is loaded per batch entry), so its windows may split a batch.
    const int64_t run = run_of(n.type);
    const int64_t unit =
        run > 0 && n.op != OpKind::batch_matmul ? tiling(run, 1, DType::fp32).count() : 1;
    int64_t pinned = 0;  // resident operands stay whole while the op runs
    for (int32_t in : n.inputs) {
      if (m_tiles.count(in)) pinned += m_tiles.at(in).count() * value_bytes_per_tile(in);
    }
    const int64_t budget = (m_sbuf.capacity() - pinned - fixed) * 3 / 4;
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
      if (auto e = lower(n)) return e;
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

  // ---- spilling ----
  // SBUF for `bytes` per partition. When none is free, values that the current op does not
  // use are spilled, the one needed furthest in the future first (Belady): a value only on
  // chip is stored to an HBM scratch tensor, then its tiles are freed; a later use reloads it.
  std::optional<Slot> sbuf_alloc(int64_t bytes, const std::string& hint) {
    for (;;) {
      if (auto s = m_sbuf.alloc(bytes, hint)) return s;
      if (!spill_one()) return std::nullopt;
    }
  }
  int next_use(int32_t id) const {
    auto it = m_uses.find(id);
    if (it == m_uses.end()) return std::numeric_limits<int>::max();
    auto u = std::lower_bound(it->second.begin(), it->second.end(), m_pos);
    return u == it->second.end() ? std::numeric_limits<int>::max() : *u;
  }
  bool spill_one() {
    int32_t victim = -1;
    bool replicated = false;
    int furthest = -1;
    auto consider = [&](int32_t id, bool rep) {
      if (m_pinned.count(id)) return;
      const int use = next_use(id);
      if (use > furthest) {
        furthest = use;
        victim = id;
        replicated = rep;
      }
    };
    for (const auto& entry : m_tiles) consider(entry.first, false);
    for (const auto& entry : m_replicated) consider(entry.first, true);
    if (victim < 0) return false;
    if (replicated) {
      release(m_replicated.at(victim));
      m_replicated.erase(victim);
      return true;
    }
    const Node& n = *m_g.find(victim);
    if (!m_in_hbm.count(victim) && !m_views.count(victim) && n.op != OpKind::input) {
      const int64_t before = m_bytes_out;
      store(victim, isa::TensorRole::scratch);
      ++m_spills;
      m_spill_bytes += m_bytes_out - before;
    }
    release(m_tiles.at(victim));
    m_tiles.erase(victim);
    return true;
  }

  // `cols` elements from `offset` on partitions 0..parts of buffer `s`.
  static AccessPattern sbuf_ap(Slot s, DType dt, int32_t parts, int64_t offset, int64_t cols) {
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
  AccessPattern tile_ap(const Tiles& v, int64_t t, int64_t col0, int64_t ncols) const {
    return sbuf_ap(v.tiles[t], v.dtype, v.rows_in(t), col0, ncols);
  }
  AccessPattern hbm_ap(Slot s, DType dt, const View& view, int64_t row0, int32_t rows, int64_t col0,
                       int64_t ncols) const {
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

  int next_load_queue() { return m_load_queues[m_next_load++ % m_load_queues.size()]; }
  int next_store_queue() { return m_store_queues[m_next_store++ % m_store_queues.size()]; }
  // A row-block copy between a tile and HBM, split by columns over several queues when it is
  // large, so one big transfer is not serialised on one DMA engine.
  void copy_rows(bool load, AccessPattern dst, AccessPattern src) {
    const std::vector<int>& queues = load ? m_load_queues : m_store_queues;
    const int64_t cols = dst.free[0].size;
    const int64_t bytes = int64_t(dst.partitions) * cols * isa::dtype_bytes(dst.dtype);
    int64_t pieces = std::min<int64_t>(static_cast<int64_t>(queues.size()),
                                       (bytes + kSplitBytes - 1) / kSplitBytes);
    if (dst.num_free != 1 || src.num_free != 1 || dst.free[0].stride != 1 ||
        src.free[0].stride != 1 || src.scalar >= 0 || dst.scalar >= 0)
      pieces = 1;
    pieces = std::max<int64_t>(1, std::min(pieces, cols));
    const int64_t step = (cols + pieces - 1) / pieces;
    for (int64_t c0 = 0; c0 < cols; c0 += step) {
      AccessPattern d = dst, s = src;
      d.offset += c0;
      s.offset += c0;
      d.free[0].size = s.free[0].size = std::min(step, cols - c0);
      dma(load ? next_load_queue() : next_store_queue(), d, s);
    }
  }

  void emit(int stream, Instruction in) {
    in.node = m_node;
    m_b.emit(stream, std::move(in));
  }
  void dma(int queue, const AccessPattern& dst, const AccessPattern& src) {
    Instruction in;
    in.op = Opcode::dma_copy;
    in.dst = dst;
    in.src[0] = src;
    emit(queue, in);
  }

  // The on-chip tiles of value `id`, loading them from HBM when the group did not produce it.
  std::optional<Tiles> tiles_of(int32_t id) {
    auto it = m_tiles.find(id);
    if (it != m_tiles.end()) return it->second;
    auto view = m_views.find(id);
    if (view != m_views.end()) {
      auto tiles = load_view(view->second, m_g.find(id)->type.dtype, id);
      if (tiles) m_tiles[id] = *tiles;
      return tiles;
    }
    const Node& n = *m_g.find(id);
    const View v = view_of(n.type);
    auto tiles = new_tiles(v.rows, v.cols, n.type.dtype, "in", run_of(n.type), id);
    if (!tiles) return std::nullopt;
    Slot src = hbm_tensor(id, isa::TensorRole::input);
    for (int64_t t = 0; t < tiles->count(); ++t) {
      copy_rows(true, tile_ap(*tiles, t, 0, v.cols),
                hbm_ap(src, n.type.dtype, v, tiles->row0(t), tiles->rows_in(t), 0, v.cols));
    }
    m_bytes_in += tiles->stored_rows() * v.cols * isa::dtype_bytes(n.type.dtype);
    m_tiles[id] = *tiles;
    return tiles;
  }

  // A row vector (view [1 x cols]) replicated on every partition: only values in HBM can be
  // broadcast across partitions (a stride-0 row DMA).
  std::optional<Tiles> replicated(int32_t id) {
    auto it = m_replicated.find(id);
    if (it != m_replicated.end()) return it->second;
    if (m_tiles.count(id)) return std::nullopt;  // on chip: no partition broadcast
    const Node& n = *m_g.find(id);
    const View v = view_of(n.type);
    auto tiles = new_tiles(m_T, v.cols, n.type.dtype, "bcast");
    if (!tiles) return std::nullopt;
    Slot src = hbm_tensor(id, isa::TensorRole::input);
    AccessPattern s = hbm_ap(src, n.type.dtype, v, 0, m_T, 0, v.cols);
    s.partition_stride = 0;
    dma(next_load_queue(), tile_ap(*tiles, 0, 0, v.cols), s);
    m_bytes_in += v.cols * isa::dtype_bytes(n.type.dtype);
    m_replicated[id] = *tiles;
    return tiles;
  }

  // Writes value `id` to its HBM tensor: an output of the plan, or plan-internal scratch (a
  // layout change goes through HBM).
  bool store(int32_t id, isa::TensorRole role = isa::TensorRole::output) {
    if (!m_tiles.count(id) && m_views.count(id) && copy_view(id, role)) return true;
    if (!m_tiles.count(id) && !tiles_of(id)) return false;
    const Tiles& v = m_tiles.at(id);
    const Node& n = *m_g.find(id);
    Slot dst = hbm_tensor(id, role);
    const View view{v.rows, v.cols};
    for (int64_t t = 0; t < v.count(); ++t) {
      copy_rows(false, hbm_ap(dst, n.type.dtype, view, v.row0(t), v.rows_in(t), 0, v.cols),
                tile_ap(v, t, 0, v.cols));
    }
    m_bytes_out += v.stored_rows() * v.cols * isa::dtype_bytes(n.type.dtype);
    m_in_hbm.insert(id);
    return true;
  }
  // A view that is not on chip, stored by DMA from HBM to HBM: runs of rows with the view's
  // strides (adjacent contiguous sub-dims merged, so a plain reshape is one run). False when the
  // view needs more free dims than a descriptor has.
  bool copy_view(int32_t id, isa::TensorRole role) {
    const ViewDesc& v = m_views.at(id);
    const ViewRows vr = view_rows(v, true);
    if (vr.free.size() > isa::kMaxFreeDims) return false;
    const DType dtype = m_g.find(id)->type.dtype;
    const int64_t run = vr.run().size;
    Slot src = hbm_tensor(v.base, isa::TensorRole::input);
    Slot dst = hbm_tensor(id, role);
    const View out{vr.rows, vr.cols};
    const int64_t chunk =
        std::max<int64_t>(1, kSplitBytes / std::max<int64_t>(1, vr.cols * isa::dtype_bytes(dtype)));
    for (int64_t r0 = 0; r0 < vr.rows; r0 += run) {
      for (int64_t r = r0; r < r0 + run; r += chunk) {
        const int32_t n = static_cast<int32_t>(std::min(chunk, r0 + run - r));
        dma(next_store_queue(), hbm_ap(dst, dtype, out, r, n, 0, vr.cols),
            view_rows_ap(v, vr, src, dtype, r, n));
      }
    }
    const int64_t bytes = vr.rows * vr.cols * isa::dtype_bytes(dtype);
    m_bytes_in += bytes;
    m_bytes_out += bytes;
    m_in_hbm.insert(id);
    return true;
  }

  // Makes sure value `id` is in HBM (group inputs are; produced values are stored as scratch).
  bool ensure_hbm(int32_t id) {
    if (m_in_hbm.count(id) || !m_group.count(id) || m_g.find(id)->op == OpKind::input) return true;
    return store(id, isa::TensorRole::scratch);
  }

  void release_dead(int position) {
    std::vector<int32_t> dead;
    for (const auto& [id, tiles] : m_tiles) {
      auto lu = m_last_use.find(id);
      const int last = lu == m_last_use.end() ? -1 : lu->second;
      if (last <= position) dead.push_back(id);
    }
    for (int32_t id : dead) {
      for (Slot s : m_tiles[id].tiles) m_sbuf.release(s);
      m_tiles.erase(id);
    }
    for (auto it = m_replicated.begin(); it != m_replicated.end();) {
      auto lu = m_last_use.find(it->first);
      if (lu == m_last_use.end() || lu->second <= position) {
        for (Slot s : it->second.tiles) m_sbuf.release(s);
        it = m_replicated.erase(it);
      } else {
        ++it;
      }
    }
  }

  // ---- instruction helpers ----
  Instruction vec(Opcode op, const AccessPattern& dst) {
    Instruction in;
    in.op = op;
    in.dst = dst;
    return in;
  }
  void tensor_tensor(AluOp alu, const AccessPattern& dst, const AccessPattern& a,
                     const AccessPattern& b) {
    Instruction in = vec(Opcode::tensor_tensor, dst);
    in.alu = alu;
    in.src[0] = a;
    in.src[1] = b;
    emit(m_b.stream(Engine::vector), in);
  }
  void tensor_scalar(AluOp alu, const AccessPattern& dst, const AccessPattern& a, double s,
                     bool reverse = false) {
    Instruction in = vec(Opcode::tensor_scalar, dst);
    in.alu = alu;
    in.src[0] = a;
    in.scalar.imm = s;
    in.reverse = reverse;
    emit(m_b.stream(Engine::vector), in);
  }
  void reduce(AluOp alu, const AccessPattern& dst, const AccessPattern& src) {
    Instruction in = vec(Opcode::tensor_reduce, dst);
    in.alu = alu;
    in.src[0] = src;
    emit(m_b.stream(Engine::vector), in);
  }
  void activation(ActFn fn, const AccessPattern& dst, const AccessPattern& src, double scale = 1,
                  double bias = 0, const AccessPattern* accum = nullptr) {
    Instruction in = vec(accum ? Opcode::activation_reduce : Opcode::activation, dst);
    in.act = fn;
    in.src[0] = src;
    in.scale = scale;
    in.bias = bias;
    if (accum) in.accum = *accum;
    emit(m_b.stream(Engine::scalar), in);
  }
  // PSUM -> SBUF, alternating between the vector and scalar engines to balance them.
  void evacuate(const AccessPattern& dst, const AccessPattern& psum) {
    if (m_evac++ % 2 == 0) {
      Instruction in = vec(Opcode::tensor_copy, dst);
      in.src[0] = psum;
      emit(m_b.stream(Engine::vector), in);
    } else {
      activation(ActFn::identity, dst, psum);
    }
  }
  AccessPattern psum_ap(Slot bank, int32_t partitions, int64_t cols, int64_t offset = 0) const {
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
  Slot next_bank() { return m_psum[m_next_bank++ % m_psum.size()]; }
  void emit_transpose(const AccessPattern& dst, const AccessPattern& src) {
    Instruction tr;
    tr.op = Opcode::transpose;
    tr.dst = dst;
    tr.src[0] = src;
    emit(m_b.stream(Engine::tensor), tr);
  }
  void emit_matmul(const AccessPattern& dst, const AccessPattern& stationary,
                   const AccessPattern& moving, bool start, bool stop) {
    Instruction mm;
    mm.op = Opcode::matmul;
    mm.dst = dst;
    mm.src[0] = stationary;
    mm.src[1] = moving;
    mm.start = start;
    mm.stop = stop;
    emit(m_b.stream(Engine::tensor), mm);
  }
  // Column c of a [rows x k] buffer, broadcast along `ncols` free elements.
  static AccessPattern broadcast_column(AccessPattern col, int64_t ncols) {
    col.num_free = 1;
    col.free[0] = {ncols, 0};
    return col;
  }
  int64_t free_chunk() const { return std::min(m_arch.vector.free_max, m_arch.scalar.free_max); }
  // Calls f(t, rows, c0, nc) for every row tile t of `v` and every run of its columns short
  // enough for one vector or scalar instruction.
  template <class F>
  void for_each_chunk(const Tiles& v, F&& f) const {
    for (int64_t t = 0; t < v.count(); ++t) {
      for (int64_t c0 = 0; c0 < v.cols; c0 += free_chunk()) {
        f(t, v.rows_in(t), c0, std::min(free_chunk(), v.cols - c0));
      }
    }
  }

  // ---- ops ----
  std::optional<CompileError> lower(const Node& n) {
    switch (n.op) {
      case OpKind::input:
        return std::nullopt;  // loaded when first used
      case OpKind::matmul:
        return lower_matmul(n);
      case OpKind::add:
      case OpKind::bias_add:
        return lower_binary(n, AluOp::add);
      case OpKind::sub:
        return lower_binary(n, AluOp::sub);
      case OpKind::mul:
        return lower_binary(n, AluOp::mul);
      case OpKind::div:
        return lower_binary(n, AluOp::div);
      case OpKind::maximum:
        return lower_binary(n, AluOp::max);
      case OpKind::scale:
        return lower_scale(n);
      case OpKind::relu:
        return lower_unary(n, ActFn::relu);
      case OpKind::gelu:
        return lower_unary(n, ActFn::gelu);
      case OpKind::silu:
        return lower_unary(n, ActFn::silu);
      case OpKind::exp:
        return lower_unary(n, ActFn::exp);
      case OpKind::tanh:
        return lower_unary(n, ActFn::tanh);
      case OpKind::sigmoid:
        return lower_unary(n, ActFn::sigmoid);
      case OpKind::rsqrt:
        return lower_unary(n, ActFn::rsqrt);
      case OpKind::reduce_sum:
        return lower_reduce(n, AluOp::add, false);
      case OpKind::reduce_max:
        return lower_reduce(n, AluOp::max, false);
      case OpKind::reduce_mean:
        return lower_reduce(n, AluOp::add, true);
      case OpKind::softmax:
      case OpKind::log_softmax:
        return lower_softmax(n, n.op == OpKind::log_softmax);
      case OpKind::layernorm:
      case OpKind::rmsnorm:
        return lower_norm(n);
      case OpKind::transpose:
        // On chip and 2-D: through the array. Otherwise a strided read of HBM.
        if (n.type.dims.size() == 2 && m_tiles.count(n.inputs[0]) && !m_views.count(n.inputs[0])) {
          return lower_transpose(n);
        }
        return lower_view(n);
      case OpKind::reshape:
        return lower_view(n);
      case OpKind::batch_matmul:
        return lower_batch_matmul(n);
      case OpKind::embedding:
        return lower_embedding(n);
      case OpKind::dynamic_update_slice:
        return lower_update_slice(n);
      case OpKind::index_copy:
        return lower_index_copy(n);
      case OpKind::decode_attention:
        return lower_decode_attention(n);
      case OpKind::slice:
        // Along the last axis of an on-chip value: a copy. Otherwise a view that reads only
        // the slice from HBM.
        if (slice_axis(n) + 1 == static_cast<int64_t>(n.type.dims.size()) &&
            m_tiles.count(n.inputs[0]) && !m_window) {
          return lower_slice(n);
        }
        return lower_view(n);
      case OpKind::concat:
        return lower_concat(n);
      case OpKind::iota:
        return lower_iota(n);
      case OpKind::compare:
        return lower_compare(n);
      case OpKind::select:
        return lower_select(n);
      default:
        return error("not supported by the lowering yet");
    }
  }

  // The output's tiles: tiled like `like` when it has the same rows, else plainly.
  std::optional<Tiles> output_tiles(const Node& n, const Tiles* like = nullptr) {
    const View v = view_of(n.type);
    const std::string hint = "v" + std::to_string(n.id);
    auto t = like && like->rows == v.rows
                 ? new_tiles_like(*like, v.cols, n.type.dtype, hint)
                 : new_tiles(v.rows, v.cols, n.type.dtype, hint, run_of(n.type), n.id);
    if (t) m_tiles[n.id] = *t;
    return t;
  }
  CompileError load_failure() const { return no_room(); }
  // The tiles of the first input with as many rows as `n`'s output: outputs follow its tiling.
  const Tiles* like_of(const Node& n) {
    const int64_t rows = view_of(n.type).rows;
    for (int32_t in : n.inputs) {
      if (view_of(m_g.find(in)->type).rows != rows) continue;
      if (!tiles_of(in)) return nullptr;
      return &m_tiles.at(in);
    }
    return nullptr;
  }

  // ---- matmul ----
  // Columns per moving operand: the array's limit and one PSUM bank of fp32.
  int64_t moving_cols() const {
    return std::min<int64_t>(m_arch.tensor.moving_free_max, m_arch.psum.bank_bytes / 4);
  }
  // Columns of one panel of a streamed B: the moving width, narrowed until two panels (double
  // buffering) take at most half of SBUF.
  int64_t panel_cols(const Node& n) const {
    const TensorType& b = m_g.find(n.inputs[1])->type;
    const View v = view_of(b);
    const int64_t per_col = tiling(v.rows, 1, DType::fp32).count() * isa::dtype_bytes(b.dtype);
    const int64_t fit = m_sbuf.capacity() / 2 / (2 * per_col);
    return std::max<int64_t>(1, std::min({moving_cols(), v.cols, fit}));
  }
  // Bytes per partition of one panel of a matmul's B: every K chunk of one column block.
  int64_t panel_bytes(const Node& n) const {
    const TensorType& b = m_g.find(n.inputs[1])->type;
    const View v = view_of(b);
    return tiling(v.rows, 1, DType::fp32).count() * panel_cols(n) * isa::dtype_bytes(b.dtype);
  }

  // A matmul streams B by panels when B is large and not on chip already.
  bool streams_b(const Node& n) const {
    const int32_t bid = n.inputs[1];
    const TensorType& bt = m_g.find(bid)->type;
    const View bv = view_of(bt);
    const int64_t bytes =
        tiling(bv.rows, 1, DType::fp32).count() * bv.cols * isa::dtype_bytes(bt.dtype);
    return !m_tiles.count(bid) && !m_views.count(bid) && bytes > m_sbuf.capacity() / 4;
  }
  // The moving operand: resident tiles, or (a large B in HBM) panels streamed per column block.
  struct Moving {
    Tiles tiles;  // tiling; with storage when resident
    bool streamed = false;
    Slot hbm;
    int64_t block_cols = 0;  // columns per panel when streamed
  };

  std::optional<CompileError> lower_matmul(const Node& n) {
    auto a = tiles_of(n.inputs[0]);
    if (!a) return load_failure();
    const int32_t bid = n.inputs[1];
    const TensorType& bt = m_g.find(bid)->type;
    const View bv = view_of(bt);
    Moving b;
    if (streams_b(n)) {
      if (!ensure_hbm(bid)) return load_failure();
      b.streamed = true;
      b.block_cols = panel_cols(n);
      b.hbm = hbm_tensor(bid, isa::TensorRole::input);
      b.tiles = tiling(bv.rows, bv.cols, bt.dtype);
    } else {
      auto tiles = tiles_of(bid);
      if (!tiles) return load_failure();
      b.tiles = *tiles;
    }
    auto out = output_tiles(n, &*a);
    if (!out) return no_room();
    std::vector<int64_t> ts(static_cast<size_t>(a->count())), kc(b.tiles.starts.size());
    for (size_t t = 0; t < ts.size(); ++t) ts[t] = static_cast<int64_t>(t);
    for (size_t k = 0; k < kc.size(); ++k) kc[k] = static_cast<int64_t>(k);
    return matmul_block(*a, ts, b, kc, 0, *out);
  }

  // Output row tiles `ts` = A's row tiles `ts` times B, accumulating over B's row tiles `kc`
  // (the K chunks; A's columns start at row0 - k_base). A's tiles are transposed through the
  // array into stationary tiles, all of them first; then, per column block of B (one PSUM
  // bank wide), each output tile accumulates its K chunks in a bank and is evacuated to SBUF.
  // A streamed B is loaded a panel at a time, the next panel while the current one is used.
  std::optional<CompileError> matmul_block(const Tiles& a, const std::vector<int64_t>& ts,
                                           const Moving& b, const std::vector<int64_t>& kc,
                                           int64_t k_base, const Tiles& out) {
    const int64_t N = b.tiles.cols, nmax = b.streamed ? b.block_cols : moving_cols();
    const DType dt = b.tiles.dtype;
    std::vector<std::vector<Slot>> at(ts.size());
    for (size_t i = 0; i < ts.size(); ++i) {
      const int64_t t = ts[i];
      const int32_t rows = a.rows_in(t);
      for (int64_t k : kc) {
        const int64_t ks = b.tiles.rows_in(k);
        const AccessPattern tp = psum_ap(next_bank(), static_cast<int32_t>(ks), rows);
        emit_transpose(tp, tile_ap(a, t, b.tiles.row0(k) - k_base, ks));
        auto s = sbuf_alloc(rows * isa::dtype_bytes(dt), "at");
        if (!s) return no_room();
        at[i].push_back(*s);
        evacuate(stationary_ap(*s, dt, static_cast<int32_t>(ks), rows), tp);
      }
    }
    const View bv{b.tiles.rows, N};
    auto load_panel = [&](int64_t n0) -> std::optional<Slot> {
      const int64_t ns = std::min(nmax, N - n0);
      auto p = sbuf_alloc(static_cast<int64_t>(kc.size()) * ns * isa::dtype_bytes(dt), "panel");
      if (!p) return std::nullopt;
      for (size_t k = 0; k < kc.size(); ++k) {
        const int32_t ks = b.tiles.rows_in(kc[k]);
        copy_rows(true, panel_ap(*p, dt, k, ks, ns),
                  hbm_ap(b.hbm, dt, bv, b.tiles.row0(kc[k]), ks, n0, ns));
        m_bytes_in += ks * ns * isa::dtype_bytes(dt);
      }
      return p;
    };
    std::optional<Slot> panel, next;
    if (b.streamed && !(panel = load_panel(0))) return no_room();
    for (int64_t n0 = 0; n0 < N; n0 += nmax) {
      const int64_t ns = std::min(nmax, N - n0);
      if (b.streamed && n0 + nmax < N && !(next = load_panel(n0 + nmax))) return no_room();
      for (size_t i = 0; i < ts.size(); ++i) {
        const int64_t t = ts[i];
        const int32_t rows = a.rows_in(t);
        Slot bank = next_bank();
        for (size_t k = 0; k < kc.size(); ++k) {
          const int32_t ks = b.tiles.rows_in(kc[k]);
          emit_matmul(
              psum_ap(bank, rows, ns), stationary_ap(at[i][k], dt, ks, rows),
              b.streamed ? panel_ap(*panel, dt, k, ks, ns) : tile_ap(b.tiles, kc[k], n0, ns),
              k == 0, k + 1 == kc.size());
        }
        evacuate(tile_ap(out, t, n0, ns), psum_ap(bank, rows, ns));
      }
      if (b.streamed) {
        m_sbuf.release(*panel);
        panel = next;
      }
    }
    for (const auto& row : at) {
      for (Slot s : row) m_sbuf.release(s);
    }
    return std::nullopt;
  }
  // K chunk k of a panel: its rows on partitions, `ns` columns at offset k * ns.
  static AccessPattern panel_ap(Slot s, DType dt, size_t k, int32_t rows, int64_t ns) {
    return sbuf_ap(s, dt, rows, static_cast<int64_t>(k) * ns, ns);
  }
  AccessPattern stationary_ap(Slot s, DType dt, int32_t k, int64_t m) const {
    return sbuf_ap(s, dt, k, 0, m);
  }

  // [B, M, K] x [B, K, N] (or [B, N, K] with transpose_b): per batch, the rows of A's tiles in
  // that batch times B's tiles in that batch. Both tilings must respect the batch boundaries.
  std::optional<CompileError> lower_batch_matmul(const Node& n) {
    const Node& an = *m_g.find(n.inputs[0]);
    const Node& bn = *m_g.find(n.inputs[1]);
    if (an.type.dims.size() != 3 || bn.type.dims.size() != 3) {
      return error("batch_matmul lowers 3-D operands only");
    }
    const int64_t M = an.type.dims[1].size;
    const int64_t* tb = n.int_attr("transpose_b");
    const bool transpose_b = tb && *tb != 0;
    const int64_t K = an.type.dims[2].size;
    auto a = tiles_of(an.id);
    if (!a) return load_failure();
    if (const int64_t chunk = bmm_chunk_entries(n)) return batch_matmul_streamed(n, *a, chunk);
    std::optional<Tiles> b;
    if (transpose_b) {
      ViewDesc v = view_of_value(bn.id);
      std::swap(v.groups[1], v.groups[2]);
      if (!ensure_hbm(v.base)) return load_failure();
      b = load_view(v, bn.type.dtype);
    } else {
      b = tiles_of(bn.id);
    }
    if (!b) return load_failure();
    auto within = [](const Tiles& x, int64_t t, int64_t block) {
      return x.row0(t) / block == (x.row0(t) + x.rows_in(t) - 1) / block;
    };
    for (int64_t t = 0; t < a->count(); ++t) {
      if (!within(*a, t, M)) return error("A's row tiles cross batch boundaries");
    }
    for (int64_t t = 0; t < b->count(); ++t) {
      if (!within(*b, t, K)) return error("B's row tiles cross batch boundaries");
    }
    auto out = output_tiles(n, &*a);
    if (!out) return no_room();
    Moving moving;
    moving.tiles = *b;
    for (int64_t t0 = 0; t0 < a->count();) {  // one batch at a time
      const int64_t batch = a->row0(t0) / M;
      std::vector<int64_t> ts, kc;
      for (; t0 < a->count() && a->row0(t0) / M == batch; ++t0) ts.push_back(t0);
      for (int64_t k = 0; k < b->count(); ++k) {
        if (b->row0(k) / K == batch) kc.push_back(k);
      }
      if (auto e = matmul_block(*a, ts, moving, kc, batch * K, *out)) return e;
    }
    if (transpose_b) release(*b);
    return std::nullopt;
  }

  // Elements one step of a merged dim's outermost sub-dim covers: the product of the others.
  static int64_t inner_size(const std::vector<SubDim>& group) {
    int64_t inner = 1;
    for (size_t k = 1; k < group.size(); ++k) inner *= group[k].size;
    return inner;
  }
  // B of a batch_matmul as loaded: [batch, K, N] (a transposed B is read as a strided view).
  ViewDesc bmm_b_view(const Node& n) const {
    ViewDesc v = view_of_value(n.inputs[1]);
    const int64_t* tb = n.int_attr("transpose_b");
    if (tb && *tb != 0) std::swap(v.groups[1], v.groups[2]);
    return v;
  }
  // Batch entries of B a batch_matmul loads at a time, when B is too large to load whole (a
  // quarter of SBUF); 0 when it is loaded whole. Chunks cover whole inner sub-dims of the batch
  // dim (a reshape may have merged two dims into it).
  int64_t bmm_chunk_entries(const Node& n) const {
    const Node& an = *m_g.find(n.inputs[0]);
    const Node& bn = *m_g.find(n.inputs[1]);
    if (n.op != OpKind::batch_matmul || an.type.dims.size() != 3 || bn.type.dims.size() != 3)
      return 0;
    const int64_t* tb = n.int_attr("transpose_b");
    if (m_tiles.count(bn.id) && !(tb && *tb != 0)) return 0;  // already on chip
    const ViewDesc v = bmm_b_view(n);
    const int64_t batches = bn.type.dims[0].size;
    const int64_t K = an.type.dims[2].size, N = n.type.dims[2].size;
    const int64_t entry = (K + m_T - 1) / m_T * N * isa::dtype_bytes(bn.type.dtype);
    if (batches < 2 || entry * batches <= m_sbuf.capacity() / 4) return 0;
    const int64_t inner = inner_size(v.groups[0]);
    const int64_t fit = std::max<int64_t>(1, m_sbuf.capacity() / 4 / entry);
    return std::max<int64_t>(inner, fit / inner * inner);
  }
  // batch_matmul with B streamed: for A's batches in order, B's entries are loaded a chunk at a
  // time (a slice of its batch dim) and released when A moves past them.
  std::optional<CompileError> batch_matmul_streamed(const Node& n, const Tiles& a, int64_t chunk) {
    const Node& bn = *m_g.find(n.inputs[1]);
    const int64_t M = m_g.find(n.inputs[0])->type.dims[1].size;
    const int64_t K = m_g.find(n.inputs[0])->type.dims[2].size;
    const int64_t batches = bn.type.dims[0].size;
    ViewDesc v = bmm_b_view(n);
    if (!ensure_hbm(v.base)) return load_failure();
    auto out = output_tiles(n, &a);
    if (!out) return no_room();
    std::optional<Tiles> b;
    int64_t loaded = -1;  // first entry of the loaded chunk
    Moving moving;
    for (int64_t t0 = 0; t0 < a.count();) {
      const int64_t batch = a.row0(t0) / M;
      std::vector<int64_t> ts;
      for (; t0 < a.count() && a.row0(t0) / M == batch; ++t0) {
        if ((a.row0(t0) + a.rows_in(t0) - 1) / M != batch)
          return error("A's row tiles cross batch boundaries");
        ts.push_back(t0);
      }
      const int64_t first = batch / chunk * chunk;
      if (first != loaded) {
        if (b) release(*b);
        ViewDesc c = v;
        auto& g0 = c.groups[0];
        const int64_t inner = inner_size(g0);
        const int64_t count = std::min(chunk, batches - first);
        c.offset += first / inner * g0[0].stride;
        g0[0].size = count / inner;
        b = load_view(c, bn.type.dtype);
        if (!b) return load_failure();
        loaded = first;
        moving.tiles = *b;
      }
      std::vector<int64_t> kc;
      for (int64_t k = 0; k < b->count(); ++k) {
        if (b->row0(k) / K == batch - first) kc.push_back(k);
      }
      if (auto e = matmul_block(a, ts, moving, kc, (batch - first) * K, *out)) return e;
    }
    if (b) release(*b);
    return std::nullopt;
  }

  // The int32 ids (a 1-D tensor in HBM) of row tile `t` of `rows`: one per partition.
  static AccessPattern ids_ap(Slot ids, const Tiles& rows, int64_t t) {
    AccessPattern a;
    a.space = MemSpace::hbm;
    a.buffer = ids.index;
    a.dtype = DType::int32;
    a.partitions = rows.rows_in(t);
    a.partition_stride = 1;
    a.offset = rows.row0(t);
    return a;
  }

  // out[i, :] = table[ids[i], :]: the ids are loaded one per partition, then one gather
  // descriptor per row tile fetches the rows they name.
  std::optional<CompileError> lower_embedding(const Node& n) {
    const int32_t table = n.inputs[0], ids = n.inputs[1];
    if (m_group.count(ids) || m_views.count(ids)) {
      return error("embedding ids computed on the chip are not supported yet");
    }
    if (!ensure_hbm(table) || m_views.count(table))
      return error("the table must be a tensor in HBM");
    auto out = output_tiles(n);
    if (!out) return no_room();
    auto idx = new_tiles_like(*out, 1, DType::int32, "ids");
    if (!idx) return no_room();
    const Node& tn = *m_g.find(table);
    const View tv = view_of(tn.type);
    Slot ids_hbm = hbm_tensor(ids, isa::TensorRole::input);
    Slot table_hbm = hbm_tensor(table, isa::TensorRole::input);
    for (int64_t t = 0; t < out->count(); ++t) {
      const int queue = next_load_queue();
      dma(queue, tile_ap(*idx, t, 0, 1), ids_ap(ids_hbm, *out, t));
      Instruction g;
      g.op = Opcode::dma_gather;
      g.dst = tile_ap(*out, t, 0, out->cols);
      g.src[0] = hbm_ap(table_hbm, tn.type.dtype, tv, 0, static_cast<int32_t>(tv.rows), 0, tv.cols);
      g.src[1] = tile_ap(*idx, t, 0, 1);
      emit(queue, g);
    }
    m_bytes_in += out->stored_rows() * (4 + out->cols * isa::dtype_bytes(out->dtype));
    release(*idx);
    return std::nullopt;
  }

  // In-place writes chain: a cache is the graph input at the root of its appends and copies.
  int32_t cache_root(int32_t id) const {
    for (const Node* n = m_g.find(id);
         n->op == OpKind::dynamic_update_slice || n->op == OpKind::index_copy; n = m_g.find(id)) {
      id = n->inputs[0];
    }
    return id;
  }

  // A paged KV write: dst[ids[i], :] = src[i, :]. The ids are loaded one per partition, then
  // one scatter descriptor per row tile of src writes the rows they name into dst's own HBM
  // tensor; the result aliases dst (value_name()).
  std::optional<CompileError> lower_index_copy(const Node& n) {
    const int32_t dst = cache_root(n.inputs[0]), ids = n.inputs[1];
    const Node& dn = *m_g.find(dst);
    if (dn.op != OpKind::input) return error("dst must be a graph input (a cache in HBM)");
    if (m_group.count(ids) || m_views.count(ids)) {
      return error("index_copy ids computed on the chip are not supported yet");
    }
    auto src = tiles_of(n.inputs[2]);
    if (!src) return no_room();
    auto idx = new_tiles_like(*src, 1, DType::int32, "ids");
    if (!idx) return no_room();
    Slot ids_hbm = hbm_tensor(ids, isa::TensorRole::input);
    Slot cache = hbm_tensor(dst, isa::TensorRole::inout);
    m_b.set_role(cache, isa::TensorRole::inout);
    const View cv = view_of(dn.type);
    for (int64_t t = 0; t < src->count(); ++t) {
      const int queue = next_store_queue();
      dma(queue, tile_ap(*idx, t, 0, 1), ids_ap(ids_hbm, *src, t));
      Instruction s;
      s.op = Opcode::dma_scatter;
      s.dst = hbm_ap(cache, dn.type.dtype, cv, 0, static_cast<int32_t>(cv.rows), 0, cv.cols);
      s.src[0] = tile_ap(*src, t, 0, src->cols);
      s.src[1] = tile_ap(*idx, t, 0, 1);
      emit(queue, s);
    }
    m_bytes_out += src->stored_rows() * (4 + src->cols * isa::dtype_bytes(dn.type.dtype));
    release(*idx);
    m_hbm[n.id] = cache;
    m_in_hbm.insert(n.id);
    return std::nullopt;
  }

  // decode_attention: one query row per sequence against its keys and values, gathered from the
  // pools by row ids. Per sequence, in key tiles of T rows (keys on partitions), three stages:
  //  1. scores^T [keys, H]: the query, broadcast to every partition by DMA and pre-scaled, times
  //     the gathered K tile, summed per head (one multiply and one grouped reduce on the vector
  //     engine, every head at once); transposed through the array into S [H, L] a PSUM bank at
  //     a time, the bias added on the way to SBUF;
  //  2. a softmax along each head's row of S; P's key tiles transposed back (P^T [keys, H]);
  //  3. O [H, cols] accumulates P^T_j^T . V_j per column block in a bank; a 0/1 mask keeps
  //     head h's columns of row h and a ones-vector matmul sums the H rows into the output row,
  //     which an SBUF-to-SBUF DMA moves to its partition of the output tile.
  // Engines run their streams in order, so the stages are software-pipelined: stage 1 of
  // sequence b is emitted with stage 2 of b - 1 and stage 3 of b - 2, each sequence in flight
  // on its own PSUM banks, so no engine waits on a sequence's whole chain (unless three
  // sequences' state would crowd SBUF: then one at a time). Instructions grow
  // with sequences x key tiles, not with heads: all heads share each one.
  std::optional<CompileError> lower_decode_attention(const Node& n) {
    const int32_t qid = n.inputs[0], kid = n.inputs[1], vid = n.inputs[2], iid = n.inputs[3];
    const int32_t bid = n.inputs.size() > 4 ? n.inputs[4] : -1;
    const TensorType& qt = m_g.find(qid)->type;
    const TensorType& kt = m_g.find(kid)->type;
    const int64_t B = qt.dims[0].size, D = qt.dims[1].size, N = kt.dims[0].size;
    const int64_t L = m_g.find(iid)->type.dims[1].size;
    const int64_t H = *n.int_attr("heads"), hd = D / H;
    const DType qdt = qt.dtype, kvdt = kt.dtype, odt = n.type.dtype;
    const DType bdt = bid >= 0 ? m_g.find(bid)->type.dtype : DType::fp32;
    const int64_t bank_cols = m_arch.psum.bank_bytes / 4;
    const int64_t banks = static_cast<int64_t>(m_psum.size());
    if (H > m_T) {
      return error(std::to_string(H) + " heads exceed the " + std::to_string(m_T) +
                   " columns of the array");
    }
    if (bank_cols < m_T || bank_cols < H) return error("a PSUM bank is narrower than a key tile");
    if (banks < 4) return error("needs at least 4 PSUM banks");
    if (auto e = needs_one_chunk(std::max(D, L))) return e;
    if (m_group.count(iid) || m_views.count(iid)) {
      return error("decode_attention ids computed on the chip are not supported yet");
    }
    for (int32_t id : {qid, kid, vid, bid}) {
      if (id >= 0 && !ensure_hbm(id)) return load_failure();
    }
    auto out = output_tiles(n);
    if (!out) return no_room();
    Slot q_hbm = hbm_tensor(qid, isa::TensorRole::input);
    Slot k_hbm = hbm_tensor(kid, isa::TensorRole::input);
    Slot v_hbm = hbm_tensor(vid, isa::TensorRole::input);
    Slot ids_hbm = hbm_tensor(iid, isa::TensorRole::input);
    std::optional<Slot> bias_hbm;
    if (bid >= 0) bias_hbm = hbm_tensor(bid, isa::TensorRole::input);
    const View pool{N, D};
    auto alloc = [&](int64_t elems, DType dt, const char* hint) {
      return sbuf_alloc(elems * isa::dtype_bytes(dt), hint);
    };
    auto vector_op = [&](Opcode op, const AccessPattern& dst, double value, double pstep,
                         double step) {
      Instruction in = vec(op, dst);
      in.value = value;
      in.partition_step = pstep;
      in.step = step;
      emit(m_b.stream(Engine::vector), in);
    };

    // Once per op: mask[h, c] = (c / hd == h), from c - hd * h in [0, hd); a ones column.
    const int32_t Hp = static_cast<int32_t>(H);
    auto diff = alloc(D, DType::fp32, "attn_mask");
    auto mask = alloc(D, kvdt, "attn_mask");
    auto ones = alloc(1, kvdt, "ones");
    if (!diff || !mask || !ones) return no_room();
    const AccessPattern dap = sbuf_ap(*diff, DType::fp32, Hp, 0, D);
    const AccessPattern map = sbuf_ap(*mask, kvdt, Hp, 0, D);
    vector_op(Opcode::iota, dap, 0, -double(hd), 1);
    tensor_scalar(AluOp::lt, map, dap, double(hd));
    tensor_scalar(AluOp::ge, dap, dap, 0.0);
    tensor_tensor(AluOp::mul, map, map, dap);
    vector_op(Opcode::memset, sbuf_ap(*ones, kvdt, Hp, 0, 1), 1, 0, 0);
    m_sbuf.release(*diff);

    const int64_t tiles = (L + m_T - 1) / m_T;
    const int32_t TP = static_cast<int32_t>(std::min<int64_t>(m_T, L));
    auto rows_of = [&](int64_t j) {
      return static_cast<int32_t>(std::min<int64_t>(m_T, L - j * m_T));
    };
    const double scale = attention_scale(n);
    // PSUM: three banks rotate through stages 1-2 (one per sequence in flight); the rest hold
    // output column blocks for stage 3, in sets that alternate between sequences.
    const int64_t C = moving_cols();
    const int64_t at_once = std::max<int64_t>(1, std::min((D + C - 1) / C, (banks - 3) / 2));
    const int64_t sets = (banks - 3) / at_once;

    struct Seq {  // one sequence's on-chip state between stages
      std::vector<Slot> held;
      Slot idx, v, s, pt, stats;
    };
    std::map<int64_t, Seq> live;
    auto take = [&](Seq& q, int64_t elems, DType dt, const char* hint) -> std::optional<Slot> {
      auto s = alloc(elems, dt, hint);
      if (s) q.held.push_back(*s);
      return s;
    };
    auto ids_col = [&](const Seq& q, int64_t j) {
      return sbuf_ap(q.idx, DType::int32, rows_of(j), j, 1);
    };
    auto gather = [&](const AccessPattern& dst, const Seq& q, int64_t j, Slot table, int64_t c0,
                      int64_t nc) {
      Instruction g;
      g.op = Opcode::dma_gather;
      g.dst = dst;
      g.src[0] = hbm_ap(table, kvdt, pool, 0, static_cast<int32_t>(N), c0, nc);
      g.src[1] = ids_col(q, j);
      emit(next_load_queue(), g);
      m_bytes_in += rows_of(j) * (4 + nc * isa::dtype_bytes(kvdt));
    };

    // Stage 1: loads, scores into S (+ bias), V gathered for stage 3.
    auto stage1 = [&](int64_t b) -> std::optional<CompileError> {
      Seq& q = live[b];
      auto qb = alloc(D, qdt, "q");
      auto qs = take(q, D, DType::fp32, "q");
      auto idx = take(q, tiles, DType::int32, "ids");
      auto s = take(q, L, DType::fp32, "scores");
      auto st = take(q, tiles * H, DType::fp32, "scores_t");
      auto pt = take(q, tiles * H, kvdt, "p_t");
      auto stats = take(q, 3, DType::fp32, "stats");
      auto v = take(q, tiles * D, kvdt, "v");
      std::optional<Slot> bias;
      if (bid >= 0) bias = take(q, L, bdt, "bias");
      if (!qb || !qs || !idx || !s || !st || !pt || !stats || !v || (bid >= 0 && !bias)) {
        return no_room();
      }
      q.idx = *idx;
      q.v = *v;
      q.s = *s;
      q.pt = *pt;
      q.stats = *stats;
      // The sequence's ids, a column per key tile: the whole tiles in one DMA, then the short.
      for (int64_t j0 = 0, full = L / m_T; j0 < tiles;) {
        const int64_t count = j0 < full ? full : 1;
        const int32_t rows = rows_of(j0);
        AccessPattern src = hbm_ap(ids_hbm, DType::int32, View{B, L}, b, rows, j0 * m_T, 1);
        src.partition_stride = 1;
        src.free[0] = {count, m_T};
        dma(next_load_queue(), sbuf_ap(*idx, DType::int32, rows, j0, count), src);
        j0 += count;
      }
      // The query on every partition, scaled.
      AccessPattern qsrc = hbm_ap(q_hbm, qdt, View{B, D}, b, TP, 0, D);
      qsrc.partition_stride = 0;
      dma(next_load_queue(), sbuf_ap(*qb, qdt, TP, 0, D), qsrc);
      tensor_scalar(AluOp::mul, sbuf_ap(*qs, DType::fp32, TP, 0, D), sbuf_ap(*qb, qdt, TP, 0, D),
                    scale);
      m_sbuf.release(*qb);
      if (bias) {
        dma(next_load_queue(), sbuf_ap(*bias, bdt, Hp, 0, L),
            hbm_ap(*bias_hbm, bdt, View{B * H, L}, b * H, Hp, 0, L));
      }
      const Slot bank = m_psum[static_cast<size_t>(b % 3)];
      const int64_t per_bank = bank_cols / m_T;
      for (int64_t g0 = 0; g0 < tiles; g0 += per_bank) {
        const int64_t g1 = std::min(tiles, g0 + per_bank);
        for (int64_t j = g0; j < g1; ++j) {
          const int32_t rows = rows_of(j);
          auto k = alloc(D, kvdt, "k"), prod = alloc(D, DType::fp32, "qk");
          if (!k || !prod) return no_room();
          gather(sbuf_ap(*k, kvdt, rows, 0, D), q, j, k_hbm, 0, D);
          const AccessPattern pap = sbuf_ap(*prod, DType::fp32, rows, 0, D);
          tensor_tensor(AluOp::mul, pap, sbuf_ap(*k, kvdt, rows, 0, D),
                        sbuf_ap(*qs, DType::fp32, rows, 0, D));
          AccessPattern heads = pap;
          heads.num_free = 2;
          heads.free[0] = {H, hd};
          heads.free[1] = {hd, 1};
          const AccessPattern sj = sbuf_ap(*st, DType::fp32, rows, j * H, H);
          reduce(AluOp::add, sj, heads);
          emit_transpose(psum_ap(bank, Hp, rows, (j - g0) * m_T), sj);
          m_sbuf.release(*k);
          m_sbuf.release(*prod);
        }
        const int64_t c0 = g0 * m_T, nc = std::min(L, g1 * m_T) - c0;
        const AccessPattern sdst = sbuf_ap(*s, DType::fp32, Hp, c0, nc);
        if (bias) {
          tensor_tensor(AluOp::add, sdst, psum_ap(bank, Hp, nc), sbuf_ap(*bias, bdt, Hp, c0, nc));
        } else {
          evacuate(sdst, psum_ap(bank, Hp, nc));
        }
      }
      for (int64_t j = 0; j < tiles; ++j) {  // V, for stage 3, while the scores are computed
        gather(sbuf_ap(*v, kvdt, rows_of(j), j * D, D), q, j, v_hbm, 0, D);
      }
      return std::nullopt;
    };

    // Stage 2: softmax, then P^T per key tile, a bank of them at a time.
    auto stage2 = [&](int64_t b) {
      const Seq& q = live.at(b);
      const AccessPattern sall = sbuf_ap(q.s, DType::fp32, Hp, 0, L);
      softmax_rows(sall, sall, sall, q.stats, false);
      const Slot bank = m_psum[static_cast<size_t>(b % 3)];
      const int64_t per_bank = bank_cols / H;
      for (int64_t g0 = 0; g0 < tiles; g0 += per_bank) {
        const int64_t g1 = std::min(tiles, g0 + per_bank);
        for (int64_t j = g0; j < g1; ++j) {
          emit_transpose(psum_ap(bank, rows_of(j), Hp, (j - g0) * H),
                         sbuf_ap(q.s, DType::fp32, Hp, j * m_T, rows_of(j)));
        }
        // Whole tiles in one copy; a short last tile on its own partitions.
        const int64_t short_tile = rows_of(g1 - 1) < TP ? g1 - 1 : g1;
        if (short_tile > g0) {
          evacuate(sbuf_ap(q.pt, kvdt, TP, g0 * H, (short_tile - g0) * H),
                   psum_ap(bank, TP, (short_tile - g0) * H));
        }
        if (short_tile < g1) {
          evacuate(sbuf_ap(q.pt, kvdt, rows_of(short_tile), short_tile * H, H),
                   psum_ap(bank, rows_of(short_tile), H, (short_tile - g0) * H));
        }
      }
    };

    // Stage 3: O = P V per column block; the heads' own columns summed into the output row.
    auto stage3 = [&](int64_t b) -> std::optional<CompileError> {
      Seq& q = live.at(b);
      auto row = take(q, D, odt, "row");
      if (!row) return no_room();
      const Slot sum_bank = m_psum[static_cast<size_t>(b % 3)];
      const size_t set = static_cast<size_t>(3 + (b % sets) * at_once);
      for (int64_t c0 = 0; c0 < D; c0 += C * at_once) {
        const int64_t width = std::min(C * at_once, D - c0);
        for (int64_t j = 0; j < tiles; ++j) {
          for (int64_t off = 0; off < width; off += C) {
            const int64_t nc = std::min(C, width - off);
            emit_matmul(psum_ap(m_psum[set + static_cast<size_t>(off / C)], Hp, nc),
                        sbuf_ap(q.pt, kvdt, rows_of(j), j * H, H),
                        sbuf_ap(q.v, kvdt, rows_of(j), j * D + c0 + off, nc), j == 0,
                        j + 1 == tiles);
          }
        }
        for (int64_t off = 0; off < width; off += C) {
          const int64_t nc = std::min(C, width - off);
          auto masked = alloc(nc, kvdt, "masked");
          if (!masked) return no_room();
          tensor_tensor(AluOp::mul, sbuf_ap(*masked, kvdt, Hp, 0, nc),
                        psum_ap(m_psum[set + static_cast<size_t>(off / C)], Hp, nc),
                        sbuf_ap(*mask, kvdt, Hp, c0 + off, nc));
          emit_matmul(psum_ap(sum_bank, 1, nc), sbuf_ap(*ones, kvdt, Hp, 0, 1),
                      sbuf_ap(*masked, kvdt, Hp, 0, nc), true, true);
          evacuate(sbuf_ap(*row, odt, 1, c0 + off, nc), psum_ap(sum_bank, 1, nc));
          m_sbuf.release(*masked);
        }
      }
      // The row to its place: partition b - row0 of b's output tile.
      int64_t t = 0;
      while (out->row0(t) + out->rows_in(t) <= b) ++t;
      AccessPattern dst = tile_ap(*out, t, 0, D);
      dst.partition_start = static_cast<int32_t>(b - out->row0(t));
      dst.partitions = 1;
      dma(next_store_queue(), dst, sbuf_ap(*row, odt, 1, 0, D));
      for (Slot s : q.held) m_sbuf.release(s);
      live.erase(b);
      return std::nullopt;
    };

    // Three sequences in flight when their state takes at most half of SBUF, else one.
    const int64_t kvb = isa::dtype_bytes(kvdt);
    const int64_t state = D * (4 + isa::dtype_bytes(odt)) + tiles * (4 + H * (4 + kvb) + D * kvb) +
                          L * (4 + (bid >= 0 ? isa::dtype_bytes(bdt) : 0)) + 3 * 4;
    const int64_t lag = 3 * state + D * (4 + kvb) <= m_sbuf.capacity() / 2 ? 1 : 0;
    for (int64_t i = 0; i < B + 2 * lag; ++i) {
      if (i < B) {
        if (auto e = stage1(i)) return e;
      }
      if (i - lag >= 0 && i - lag < B) stage2(i - lag);
      if (i - 2 * lag >= 0 && i - 2 * lag < B) {
        if (auto e = stage3(i - 2 * lag)) return e;
      }
    }
    m_sbuf.release(*mask);
    m_sbuf.release(*ones);
    return std::nullopt;
  }

  // A KV append: the update's rows are written into the cache's own HBM tensor at the run-time
  // position, by DMA with a scalar offset. The result aliases the cache (value_name()).
  std::optional<CompileError> lower_update_slice(const Node& n) {
    const int32_t dst = cache_root(n.inputs[0]);
    const Node& dn = *m_g.find(dst);
    const int64_t* axis = n.int_attr("axis");
    if ((axis && *axis != 0) || dn.op != OpKind::input || dn.type.dims.size() != 2) {
      return error("only appends along axis 0 of a 2-D graph input (a cache in HBM) are supported");
    }
    const std::string* scalar_name = n.text_attr("scalar");
    auto scalar = scalar_name ? plan_scalar(*scalar_name) : std::nullopt;
    if (!scalar) return error("needs a declared run-time scalar position");
    auto upd = tiles_of(n.inputs[1]);
    if (!upd) return no_room();
    Slot cache = hbm_tensor(dst, isa::TensorRole::inout);
    m_b.set_role(cache, isa::TensorRole::inout);
    const int64_t row_elems = dn.type.dims[1].size;
    const View cv{dn.type.dims[0].size, row_elems};
    for (int64_t t = 0; t < upd->count(); ++t) {
      AccessPattern d = hbm_ap(cache, dn.type.dtype, cv, upd->row0(t), upd->rows_in(t), 0, cv.cols);
      d.scalar = *scalar;
      d.scalar_stride = row_elems;
      dma(next_store_queue(), d, tile_ap(*upd, t, 0, upd->cols));
    }
    m_bytes_out += upd->stored_rows() * upd->cols * isa::dtype_bytes(dn.type.dtype);
    m_hbm[n.id] = cache;
    m_in_hbm.insert(n.id);
    return std::nullopt;
  }

  int64_t slice_axis(const Node& n) const {
    const int64_t rank = static_cast<int64_t>(n.type.dims.size());
    const int64_t* axis = n.int_attr("axis");
    return axis ? (*axis < 0 ? *axis + rank : *axis) : 0;
  }
  // Columns [start, limit) of the last axis of an on-chip value: a copy on the vector engine.
  std::optional<CompileError> lower_slice(const Node& n) {
    auto in = tiles_of(n.inputs[0]);
    if (!in) return no_room();
    auto out = output_tiles(n, like_of(n));
    if (!out) return no_room();
    const int64_t start = n.int_attr("start") ? *n.int_attr("start") : 0;
    for_each_chunk(*out, [&](int64_t t, int32_t rows, int64_t c0, int64_t nc) {
      Instruction in_copy = vec(Opcode::tensor_copy, tile_ap(*out, t, c0, nc));
      in_copy.src[0] = tile_ap(*in, t, start + c0, nc);
      emit(m_b.stream(Engine::vector), in_copy);
    });
    return std::nullopt;
  }

  // Along the last axis: copies into the output's tiles on the vector engine. Along another
  // axis: each input is copied, HBM to HBM, into its place in the output's tensor; consumers
  // load the result from there.
  std::optional<CompileError> lower_concat(const Node& n) {
    const int64_t rank = static_cast<int64_t>(n.type.dims.size());
    const int64_t a = slice_axis(n);
    if (a != rank - 1) return concat_in_hbm(n, a);
    auto out = output_tiles(n, like_of(n));
    if (!out) return no_room();
    int64_t col = 0;
    for (int32_t id : n.inputs) {
      auto in = tiles_of(id);
      if (!in) return no_room();
      if (!in->same_tiling(*out)) return error("operands are tiled differently");
      for (int64_t t = 0; t < out->count(); ++t) {
        for (int64_t c0 = 0; c0 < in->cols; c0 += free_chunk()) {
          const int64_t nc = std::min(free_chunk(), in->cols - c0);
          Instruction cp = vec(Opcode::tensor_copy, tile_ap(*out, t, col + c0, nc));
          cp.src[0] = tile_ap(*in, t, c0, nc);
          emit(m_b.stream(Engine::vector), cp);
        }
      }
      col += in->cols;
    }
    return std::nullopt;
  }
  std::optional<CompileError> concat_in_hbm(const Node& n, int64_t axis) {
    // Output viewed as [outer, total x inner]: input i fills columns [at_i, at_i + len_i) of
    // every row, with len_i = its axis size x inner.
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= n.type.dims[d].size;
    for (size_t d = static_cast<size_t>(axis) + 1; d < n.type.dims.size(); ++d)
      inner *= n.type.dims[d].size;
    const int64_t total = n.type.dims[axis].size * inner;
    const isa::TensorRole role =
        needed_outside(n.id) ? isa::TensorRole::output : isa::TensorRole::scratch;
    Slot dst = hbm_tensor(n.id, role);
    int64_t at = 0;
    for (int32_t id : n.inputs) {
      if (!ensure_hbm(id)) return load_failure();  // a view is materialised first
      const Node& in = *m_g.find(id);
      const int64_t len = in.type.dims[axis].size * inner;
      Slot src = hbm_tensor(id, isa::TensorRole::input);
      for (int64_t r0 = 0; r0 < outer; r0 += m_T) {
        const int32_t rows = static_cast<int32_t>(std::min<int64_t>(m_T, outer - r0));
        dma(next_store_queue(), hbm_ap(dst, n.type.dtype, View{outer, total}, r0, rows, at, len),
            hbm_ap(src, in.type.dtype, View{outer, len}, r0, rows, 0, len));
      }
      m_bytes_in += outer * len * isa::dtype_bytes(in.type.dtype);
      m_bytes_out += outer * len * isa::dtype_bytes(n.type.dtype);
      at += len;
    }
    m_in_hbm.insert(n.id);
    return std::nullopt;
  }

  // ---- views: reshape and transpose as strided reads of a tensor in HBM ----
  ViewDesc view_of_value(int32_t id) const {
    auto it = m_views.find(id);
    if (it != m_views.end()) return it->second;
    ViewDesc v;
    v.base = id;
    const auto& dims = m_g.find(id)->type.dims;
    int64_t stride = 1;
    v.groups.resize(dims.size());
    for (size_t i = dims.size(); i-- > 0;) {
      v.groups[i] = {{dims[i].size, stride}};
      stride *= dims[i].size;
    }
    return v;
  }

  std::optional<CompileError> lower_view(const Node& n) {
    ViewDesc v = view_of_value(n.inputs[0]);
    if (n.op == OpKind::slice) {
      // [start, limit) of one dim: its outermost sub-dim, when the range covers whole inner
      // sub-dims (always so for a dim that no reshape merged).
      const size_t a = static_cast<size_t>(slice_axis(n));
      const int64_t start = n.int_attr("start") ? *n.int_attr("start") : 0;
      const int64_t len = n.type.dims.at(a).size;
      auto& group = v.groups.at(a);
      const int64_t inner = inner_size(group);
      if (start % inner || len % inner)
        return error("this slice of a merged dimension is not supported");
      v.offset += start / inner * group[0].stride;
      group[0].size = len / inner;
    } else if (n.op == OpKind::transpose) {
      const auto* perm = n.ints_attr("perm");
      if (!perm || perm->size() != v.groups.size()) return error("bad permutation");
      ViewDesc t;
      t.base = v.base;
      t.offset = v.offset;
      for (int64_t p : *perm) t.groups.push_back(v.groups.at(static_cast<size_t>(p)));
      v = t;
    } else {  // reshape: regroup the sub-dims by the new dims' sizes
      std::vector<SubDim> flat;
      for (const auto& g : v.groups) {
        for (const SubDim& d : g) {
          if (d.size != 1) flat.push_back(d);
        }
      }
      ViewDesc r;
      r.base = v.base;
      r.offset = v.offset;
      size_t next = 0;
      for (const Dim& d : n.type.dims) {
        int64_t need = d.size;
        std::vector<SubDim> group;
        while (need > 1) {
          if (next >= flat.size()) return error("this reshape of a strided view is not supported");
          SubDim& f = flat[next];
          if (f.size <= need) {
            if (need % f.size) return error("this reshape of a strided view is not supported");
            group.push_back(f);
            need /= f.size;
            ++next;
          } else {
            if (f.size % need) return error("this reshape of a strided view is not supported");
            group.push_back({need, f.stride * (f.size / need)});
            f.size /= need;
            need = 1;
          }
        }
        if (group.empty()) group.push_back({1, 0});
        r.groups.push_back(group);
      }
      v = r;
    }
    if (!ensure_hbm(v.base)) return load_failure();
    m_views[n.id] = v;
    return std::nullopt;
  }

  // Loads a view as row tiles: rows are the leading dims (the innermost of them is the DMA's
  // row stride, so tiles never cross it), the free pattern is the last dim's sub-dims.
  // A view as DMA rows: the leading sub-dims number the rows (the innermost is one DMA's row
  // stride), the last dim's sub-dims are one row's free pattern. `merge` joins adjacent
  // sub-dims that are contiguous (a plain reshape becomes one run).
  struct ViewRows {
    std::vector<SubDim> lead, free;
    int64_t rows = 1, cols = 1;
    const SubDim& run() const { return lead.back(); }
  };
  static ViewRows view_rows(const ViewDesc& v, bool merge) {
    ViewRows r;
    for (size_t g = 0; g < v.groups.size(); ++g) {
      for (const SubDim& d : v.groups[g]) {
        if (d.size != 1) (g + 1 < v.groups.size() ? r.lead : r.free).push_back(d);
      }
    }
    auto join = [](std::vector<SubDim>& dims) {
      std::vector<SubDim> out;
      for (const SubDim& d : dims) {
        if (!out.empty() && out.back().stride == d.size * d.stride) {
          out.back() = {out.back().size * d.size, d.stride};
        } else {
          out.push_back(d);
        }
      }
      dims = out;
    };
    if (merge) {
      join(r.lead);
      join(r.free);
    }
    if (r.lead.empty()) r.lead.push_back({1, 0});
    for (const SubDim& d : r.lead) r.rows *= d.size;
    for (const SubDim& d : r.free) r.cols *= d.size;
    return r;
  }
  // Rows [row, row + n) of a view in HBM (within one run), as a DMA access pattern.
  static AccessPattern view_rows_ap(const ViewDesc& v, const ViewRows& vr, Slot src, DType dtype,
                                    int64_t row, int32_t n) {
    const SubDim& run = vr.run();
    int64_t r = row, offset = (r % run.size) * run.stride;
    r /= run.size;
    for (size_t k = vr.lead.size() - 1; k-- > 0;) {
      offset += (r % vr.lead[k].size) * vr.lead[k].stride;
      r /= vr.lead[k].size;
    }
    AccessPattern s;
    s.space = MemSpace::hbm;
    s.buffer = src.index;
    s.dtype = dtype;
    s.partitions = n;
    s.partition_stride = run.stride;
    s.offset = v.offset + offset;
    s.num_free = static_cast<uint8_t>(vr.free.size());
    for (size_t k = 0; k < vr.free.size(); ++k) s.free[k] = {vr.free[k].size, vr.free[k].stride};
    return s;
  }

  std::optional<Tiles> load_view(const ViewDesc& v, DType dtype, int32_t id = -1) {
    const ViewRows vr = view_rows(v, false);
    if (vr.free.size() > isa::kMaxFreeDims) {
      m_load_error = "a view needs more than " + std::to_string(isa::kMaxFreeDims) + " free dims";
      return std::nullopt;
    }
    const SubDim& run = vr.run();
    const int64_t rows = vr.rows, cols = vr.cols;
    // Tiles never cross the innermost leading sub-dim (one DMA row stride) nor a batch of the
    // value (its innermost leading logical dim, which may be shorter: [12, 1, 64] has 1-row
    // batches).
    int64_t tile_run = run.size;
    if (v.groups.size() >= 2) {
      int64_t logical = 1;
      for (const SubDim& d : v.groups[v.groups.size() - 2]) logical *= d.size;
      if (logical < tile_run && tile_run % logical == 0) tile_run = logical;
    }
    auto tiles = new_tiles(rows, cols, dtype, "view", tile_run, id);
    if (!tiles) return std::nullopt;
    Slot src = hbm_tensor(v.base, isa::TensorRole::input);
    for (int64_t t = 0; t < tiles->count(); ++t) {
      dma(next_load_queue(), tile_ap(*tiles, t, 0, cols),
          view_rows_ap(v, vr, src, dtype, tiles->row0(t), tiles->rows_in(t)));
    }
    m_bytes_in += tiles->stored_rows() * cols * isa::dtype_bytes(dtype);
    return tiles;
  }

  // How operand `id` broadcasts against `out` [rows x cols], and its tiles.
  std::optional<CompileError> operand(int32_t id, const Tiles& out, Bcast& how,
                                      std::optional<Tiles>& tiles) {
    const View v = view_of(m_g.find(id)->type);
    if (v.rows == out.rows && (v.cols == out.cols || v.cols == 1)) {
      how = v.cols == 1 && out.cols != 1 ? Bcast::column : Bcast::none;
      tiles = tiles_of(id);
      if (tiles && !tiles->same_tiling(out)) return error("operands are tiled differently");
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
    if (!tiles) return load_failure();
    return std::nullopt;
  }
  AccessPattern operand_ap(const Tiles& v, Bcast how, int64_t t, int64_t c0, int64_t nc,
                           int32_t rows) const {
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

  std::optional<CompileError> lower_binary(const Node& n, AluOp alu) {
    auto out = output_tiles(n, like_of(n));
    if (!out) return no_room();
    Bcast ha, hb;
    std::optional<Tiles> a, b;
    if (auto e = operand(n.inputs[0], *out, ha, a)) return e;
    if (auto e = operand(n.inputs[1], *out, hb, b)) return e;
    for_each_chunk(*out, [&](int64_t t, int32_t rows, int64_t c0, int64_t nc) {
      tensor_tensor(alu, tile_ap(*out, t, c0, nc), operand_ap(*a, ha, t, c0, nc, rows),
                    operand_ap(*b, hb, t, c0, nc, rows));
    });
    return std::nullopt;
  }

  std::optional<CompileError> lower_unary(const Node& n, ActFn fn, double scale = 1.0) {
    auto in = tiles_of(n.inputs[0]);
    if (!in) return no_room();
    auto out = output_tiles(n, like_of(n));
    if (!out) return no_room();
    for_each_chunk(*out, [&](int64_t t, int32_t rows, int64_t c0, int64_t nc) {
      activation(fn, tile_ap(*out, t, c0, nc), tile_ap(*in, t, c0, nc), scale);
    });
    return std::nullopt;
  }

  // x * value on the vector engine, which (unlike the activation path) takes any dtype.
  std::optional<CompileError> lower_scale(const Node& n) {
    auto in = tiles_of(n.inputs[0]);
    if (!in) return no_room();
    auto out = output_tiles(n, like_of(n));
    if (!out) return no_room();
    const double value = n.real_attr("value") ? *n.real_attr("value") : 1.0;
    for_each_chunk(*out, [&](int64_t t, int32_t rows, int64_t c0, int64_t nc) {
      tensor_scalar(AluOp::mul, tile_ap(*out, t, c0, nc), tile_ap(*in, t, c0, nc), value);
    });
    return std::nullopt;
  }

  std::optional<CompileError> needs_one_chunk(int64_t cols) const {
    if (cols <= free_chunk()) return std::nullopt;
    return error("the last axis (" + std::to_string(cols) + ") exceeds one vector instruction (" +
                 std::to_string(free_chunk()) + "); chunked reductions are not implemented yet");
  }

  std::optional<CompileError> lower_reduce(const Node& n, AluOp alu, bool mean) {
    auto in = tiles_of(n.inputs[0]);
    if (!in) return no_room();
    if (auto e = needs_one_chunk(in->cols)) return e;
    auto out = output_tiles(n, like_of(n));
    if (!out) return no_room();
    for (int64_t t = 0; t < out->count(); ++t) {
      reduce(alu, tile_ap(*out, t, 0, 1), tile_ap(*in, t, 0, in->cols));
      if (mean)
        tensor_scalar(AluOp::mul, tile_ap(*out, t, 0, 1), tile_ap(*out, t, 0, 1),
                      1.0 / double(in->cols));
    }
    return std::nullopt;
  }

  // Per-row fp32 scratch: `columns` values per partition.
  std::optional<Tiles> scratch(int64_t cols) { return new_tiles(m_T, cols, DType::fp32, "tmp"); }
  void release(const Tiles& t) {
    for (Slot s : t.tiles) m_sbuf.release(s);
  }

  std::optional<CompileError> lower_softmax(const Node& n, bool log) {
    auto in = tiles_of(n.inputs[0]);
    if (!in) return no_room();
    const int64_t C = in->cols;
    if (auto e = needs_one_chunk(C)) return e;
    auto out = output_tiles(n, like_of(n));
    auto stats = scratch(3);
    auto work = scratch(C);
    if (!out || !stats || !work) return no_room();
    for (int64_t t = 0; t < out->count(); ++t) {
      const int32_t rows = out->rows_in(t);
      AccessPattern w = tile_ap(*work, 0, 0, C);
      w.partitions = rows;
      softmax_rows(tile_ap(*in, t, 0, C), tile_ap(*out, t, 0, C), w, stats->tiles[0], log);
    }
    release(*stats);
    release(*work);
    return std::nullopt;
  }
  // y = softmax (or log-softmax) of each row of x, through `work` (fp32, x's shape; may be x
  // itself) and three fp32 columns of `stats` on the same partitions.
  void softmax_rows(const AccessPattern& x, const AccessPattern& y, const AccessPattern& w,
                    Slot stats, bool log) {
    const int64_t C = x.free_elements();
    auto col = [&](int64_t c) { return sbuf_ap(stats, DType::fp32, x.partitions, c, 1); };
    reduce(AluOp::max, col(0), x);
    tensor_tensor(AluOp::sub, w, x, broadcast_column(col(0), C));  // x - max
    AccessPattern sum = col(1);
    if (!log) {
      activation(ActFn::exp, w, w, 1, 0, &sum);
      tensor_scalar(AluOp::div, col(2), col(1), 1.0, /*reverse=*/true);
      tensor_tensor(AluOp::mul, y, w, broadcast_column(col(2), C));
    } else {
      activation(ActFn::exp, y, w, 1, 0, &sum);  // exp(x - max) lands in y first, then
      activation(ActFn::log, col(2), col(1));    // y = (x - max) - log(sum)
      tensor_tensor(AluOp::sub, y, w, broadcast_column(col(2), C));
    }
  }

  std::optional<CompileError> lower_norm(const Node& n) {
    const bool layer = n.op == OpKind::layernorm;
    auto in = tiles_of(n.inputs[0]);
    if (!in) return no_room();
    const int64_t C = in->cols;
    if (auto e = needs_one_chunk(C)) return e;
    const double eps = norm_eps(n);
    Bcast hg, hb = Bcast::none;
    std::optional<Tiles> gamma, beta;
    auto out = output_tiles(n, like_of(n));
    if (!out) return no_room();
    if (auto e = operand(n.inputs[1], *out, hg, gamma)) return e;
    if (layer) {
      if (auto e = operand(n.inputs[2], *out, hb, beta)) return e;
    }
    auto stats = scratch(3);
    auto work = scratch(C);
    auto sq = scratch(C);
    if (!stats || !work || !sq) return no_room();
    for (int64_t t = 0; t < out->count(); ++t) {
      const int32_t rows = out->rows_in(t);
      auto col = [&](int64_t c) {
        AccessPattern ap = tile_ap(*stats, 0, c, 1);
        ap.partitions = rows;
        return ap;
      };
      AccessPattern w = tile_ap(*work, 0, 0, C), s = tile_ap(*sq, 0, 0, C);
      w.partitions = s.partitions = rows;
      AccessPattern x = tile_ap(*in, t, 0, C), y = tile_ap(*out, t, 0, C);
      AccessPattern centred = x;
      if (layer) {
        reduce(AluOp::add, col(0), x);
        tensor_scalar(AluOp::mul, col(0), col(0), 1.0 / double(C));  // mean
        tensor_tensor(AluOp::sub, w, x, broadcast_column(col(0), C));
        centred = w;
      }
      AccessPattern ss = col(1);
      activation(ActFn::square, s, centred, 1, 0, &ss);                // sum of squares
      activation(ActFn::rsqrt, col(2), col(1), 1.0 / double(C), eps);  // 1 / sqrt(var + eps)
      tensor_tensor(AluOp::mul, w, centred, broadcast_column(col(2), C));
      if (layer) {
        tensor_tensor(AluOp::mul, w, w, operand_ap(*gamma, hg, t, 0, C, rows));
        tensor_tensor(AluOp::add, y, w, operand_ap(*beta, hb, t, 0, C, rows));
      } else {
        tensor_tensor(AluOp::mul, y, w, operand_ap(*gamma, hg, t, 0, C, rows));
      }
    }
    release(*stats);
    release(*work);
    release(*sq);
    return std::nullopt;
  }

  // [R x C] -> [C x R]: each (row tile, column chunk) block goes through the array.
  std::optional<CompileError> lower_transpose(const Node& n) {
    const auto* perm = n.ints_attr("perm");
    const size_t rank = n.type.dims.size();
    if (!perm || rank != 2 || (*perm)[0] != 1 || (*perm)[1] != 0) {
      return error("only 2-D transposes are supported by the lowering yet");
    }
    if (!isa::is_float(n.type.dtype)) return error("the array transposes float values only");
    auto in = tiles_of(n.inputs[0]);
    if (!in) return no_room();
    auto out = output_tiles(n, like_of(n));
    if (!out) return no_room();
    for (int64_t t = 0; t < in->count(); ++t) {
      const int32_t rows = in->rows_in(t);
      for (int64_t c = 0; c < out->count(); ++c) {  // output tile c = input columns of chunk c
        const int32_t cols = out->rows_in(c);
        const AccessPattern tp = psum_ap(next_bank(), cols, rows);
        emit_transpose(tp, tile_ap(*in, t, out->row0(c), cols));
        evacuate(tile_ap(*out, c, in->row0(t), rows), tp);
      }
    }
    return std::nullopt;
  }

  // value = index along `axis`: the free (last) axis, or the row axis of a 2-D tensor.
  std::optional<CompileError> lower_iota(const Node& n) {
    const int64_t rank = static_cast<int64_t>(n.type.dims.size());
    const int64_t* axis = n.int_attr("axis");
    const int64_t a = axis ? (*axis < 0 ? *axis + rank : *axis) : rank - 1;
    const bool along_cols = a == rank - 1;
    if (!along_cols && a != rank - 2) {
      return error("iota along this axis is not supported by the lowering yet");
    }
    auto out = output_tiles(n, like_of(n));
    if (!out) return no_room();
    // Along the rows' own axis the value is (row mod its extent): one instruction per run of
    // partitions within one batch entry.
    const int64_t period = along_cols ? 0 : n.type.dims[static_cast<size_t>(a)].size;
    for_each_chunk(*out, [&](int64_t t, int32_t rows, int64_t c0, int64_t nc) {
      if (along_cols) {
        Instruction in = vec(Opcode::iota, tile_ap(*out, t, c0, nc));
        in.value = double(c0);
        in.step = 1.0;
        emit(m_b.stream(Engine::vector), in);
        return;
      }
      const int64_t first = out->row0(t), end = first + rows;
      for (int64_t r = first; r < end;) {
        const int64_t stop = std::min(end, (r / period + 1) * period);
        AccessPattern d = tile_ap(*out, t, c0, nc);
        d.partition_start = static_cast<int32_t>(r - first);
        d.partitions = static_cast<int32_t>(stop - r);
        Instruction in = vec(Opcode::iota, d);
        in.value = double(r % period);
        in.partition_step = 1.0;
        emit(m_b.stream(Engine::vector), in);
        r = stop;
      }
    });
    return std::nullopt;
  }

  static std::optional<AluOp> comparison(const std::string& cmp) {
    static const std::map<std::string, AluOp> kOps = {{"lt", AluOp::lt}, {"le", AluOp::le},
                                                      {"eq", AluOp::eq}, {"ne", AluOp::ne},
                                                      {"gt", AluOp::gt}, {"ge", AluOp::ge}};
    auto it = kOps.find(cmp);
    if (it == kOps.end()) return std::nullopt;
    return it->second;
  }

  // The plan's index of run-time scalar `name`, declaring it on first use.
  std::optional<int32_t> plan_scalar(const std::string& name) {
    auto it = m_scalars.find(name);
    if (it != m_scalars.end()) return it->second;
    const ScalarParam* p = m_g.find_scalar(name);
    if (!p) return std::nullopt;
    const int32_t index = m_b.add_scalar(p->name, p->min, p->max);
    m_scalars[name] = index;
    return index;
  }

  std::optional<CompileError> lower_compare(const Node& n) {
    const std::string* cmp = n.text_attr("cmp");
    auto alu = cmp ? comparison(*cmp) : std::nullopt;
    if (!alu) return error("unknown comparison");
    auto out = output_tiles(n, like_of(n));
    if (!out) return no_room();
    Bcast ha, hb = Bcast::none;
    std::optional<Tiles> a, b;
    if (auto e = operand(n.inputs[0], *out, ha, a)) return e;
    std::optional<int32_t> scalar;
    if (n.inputs.size() > 1) {
      if (auto e = operand(n.inputs[1], *out, hb, b)) return e;
    } else {
      const std::string* name = n.text_attr("scalar");
      scalar = name ? plan_scalar(*name) : std::nullopt;
      if (!scalar) return error("compare needs a second input or a declared run-time scalar");
    }
    for_each_chunk(*out, [&](int64_t t, int32_t rows, int64_t c0, int64_t nc) {
      const AccessPattern lhs = operand_ap(*a, ha, t, c0, nc, rows);
      if (scalar) {
        Instruction in = vec(Opcode::tensor_scalar, tile_ap(*out, t, c0, nc));
        in.alu = *alu;
        in.src[0] = lhs;
        in.scalar.scalar = *scalar;
        emit(m_b.stream(Engine::vector), in);
      } else {
        tensor_tensor(*alu, tile_ap(*out, t, c0, nc), lhs, operand_ap(*b, hb, t, c0, nc, rows));
      }
    });
    return std::nullopt;
  }

  std::optional<CompileError> lower_select(const Node& n) {
    auto out = output_tiles(n, like_of(n));
    if (!out) return no_room();
    Bcast how[3];
    std::optional<Tiles> ops[3];
    for (int k = 0; k < 3; ++k) {
      if (auto e = operand(n.inputs[k], *out, how[k], ops[k])) return e;
    }
    for_each_chunk(*out, [&](int64_t t, int32_t rows, int64_t c0, int64_t nc) {
      Instruction in = vec(Opcode::select, tile_ap(*out, t, c0, nc));
      for (int k = 0; k < 3; ++k) in.src[k] = operand_ap(*ops[k], how[k], t, c0, nc, rows);
      emit(m_b.stream(Engine::vector), in);
    });
    return std::nullopt;
  }

  const Graph& m_g;
  std::set<int32_t> m_group;
  std::vector<int32_t> m_order;
  const isa::ArchSpec& m_arch;
  PlanBuilder m_b;
  SbufAllocator m_sbuf;
  int32_t m_T = 128;
  int32_t m_node = -1;
  std::vector<int> m_load_queues;
  std::vector<int> m_store_queues;
  size_t m_next_load = 0;
  size_t m_next_store = 0;
  std::vector<Slot> m_psum;
  size_t m_next_bank = 0;
  int m_evac = 0;
  std::map<int32_t, Slot> m_hbm;
  std::map<int32_t, Tiles> m_tiles;
  std::map<int32_t, Tiles> m_replicated;
  std::map<int32_t, int> m_last_use;
  std::map<int32_t, std::vector<int>> m_uses;  // value -> positions of its consumers
  std::set<int32_t> m_pinned;                  // values the current op holds: never spilled
  int m_pos = 0;                               // position of the current op in the group
  int64_t m_spills = 0;
  int64_t m_spill_bytes = 0;
  std::map<std::string, int32_t> m_scalars;
  std::map<int32_t, ViewDesc> m_views;
  std::set<int32_t> m_in_hbm;
  std::optional<std::string> m_load_error;
  struct Window {
    std::set<int32_t> ids;  // the op's output and its row-aligned operands
    int64_t t0, t1;         // their row tiles in the window
  };
  std::optional<Window> m_window;
  int64_t m_bytes_in = 0;
  int64_t m_bytes_out = 0;
};

}  // namespace

std::variant<Lowered, CompileError> lower_group(const Graph& g, const std::vector<int32_t>& group,
                                                const isa::ArchSpec& arch,
                                                const std::string& plan_name) {
  return Lowering(g, group, arch, plan_name).run();
}

}  // namespace wallsim::compiler_stub
