// The values' store of one group's lowering: how values are tiled (View, Tiles, ViewDesc),
// where they are (SBUF tiles, HBM tensors and scratch reuse, strided views), and how long they
// live (their uses in the group's order). No emission: loads and stores are LoweringContext's.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lowering/sbuf_allocator.h"
#include "wallsim/compiler_stub/graph.h"
#include "wallsim/compiler_stub/lower.h"
#include "wallsim/compiler_stub/plan_builder.h"

namespace wallsim::compiler_stub::lowering {

using isa::DType;
using isa::MemSpace;

// A value viewed as a matrix: the last dim is the columns, the others the rows.
struct View {
  int64_t rows = 1;
  int64_t cols = 1;
};
View view_of(const TensorType& t);
// Row tiles of a batched value never cross its innermost leading dim (the run); 0 if unbatched.
int64_t run_of(const TensorType& t);

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
  int64_t col_base = 0;  // a column window of tiles wider than `cols`: where it starts
  // A matmul's B [K x N] stored K-interleaved (k_interleave(), matmul_blocking.cpp): its
  // row-major bytes as [K / k_group x k_group * N] in plain row tiles, so partition p of tile t
  // holds B's rows t * tile_rows * k_group + p * k_group + j at columns [j * N, (j + 1) * N).
  // 1: plain row tiles of B.
  int64_t k_group = 1;
  int64_t count() const { return static_cast<int64_t>(starts.size()); }
  int64_t stored_rows() const {
    int64_t r = 0;
    for (int32_t c : counts) r += c;
    return r;
  }
  // Tiles [t0, t1) alone: a window of the value.
  Tiles window(int64_t t0, int64_t t1) const;
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
// Elements one step of a merged dim's outermost sub-dim covers: the product of the others.
int64_t inner_size(const std::vector<SubDim>& group);

// A view as DMA rows: the leading sub-dims number the rows (the innermost is one DMA's row
// stride), the last dim's sub-dims are one row's free pattern.
struct ViewRows {
  std::vector<SubDim> lead, free;
  int64_t rows = 1, cols = 1;
  const SubDim& run() const { return lead.back(); }
};

// Where one group's values are and how long they live. LoweringContext derives from it: its
// loads, stores, spilling and row windows update these members; everything else reads them
// through the queries below.
class ValueStore {
 public:
  ValueStore(const Graph& graph, const std::vector<int32_t>& group, const GraphUses& uses,
             PlanBuilder& builder, int32_t tile_rows, int64_t sbuf_bytes_per_partition);

  // ---- what is lowered ----
  const Graph& graph() const { return m_graph; }
  const Node& node(int32_t id) const { return *m_graph.find(id); }
  const TensorType& type_of(int32_t id) const { return m_graph.find(id)->type; }
  int32_t tile_rows() const { return m_tile_rows; }  // partitions a row tile spans
  int64_t sbuf_capacity() const { return m_sbuf.capacity(); }
  // `percent` % of SBUF per partition (an option's share).
  int64_t sbuf_share(int64_t percent) const { return m_sbuf.capacity() * percent / 100; }
  bool in_group(int32_t id) const { return m_group_ids.count(id) != 0; }
  // Whether value `id`, produced by the group, is read after it (by a node outside the group,
  // or as a graph output).
  bool needed_outside(int32_t id) const { return m_used_outside.count(id) != 0; }
  bool on_chip(int32_t id) const { return m_tiles.count(id) != 0; }
  bool is_view(int32_t id) const { return m_views.count(id) != 0; }
  bool stored_to_hbm(int32_t id) const { return m_in_hbm.count(id) != 0; }

  // ---- liveness ----
  // Records where each value is used, for freeing and spilling: the group's nodes in order, and
  // what each reads besides its inputs (`extra_reads`: an attention's spliced cache rows).
  void index_uses(const std::vector<int32_t>& order,
                  const std::function<std::vector<int32_t>(const Node&)>& extra_reads);
  // How many ops of the group read value `id`.
  size_t use_count(int32_t id) const {
    auto it = m_uses.find(id);
    return it == m_uses.end() ? 0 : it->second.size();
  }
  // Whether value `id` is read at or after `position` (itself or a view of it).
  bool live_after(int32_t id, int position) const;
  // Frees the tiles (replicated rows, derived forms, scratch tensors) of values with no use
  // after `position`.
  void release_dead(int position);
  LowerStats stats() const;

  // ---- storage ----
  Slot hbm_tensor(int32_t id, isa::TensorRole role);
  // Value `id` is (already) the HBM tensor `tensor`: an in-place write's result.
  void alias_hbm(int32_t id, Slot tensor);
  void set_view(int32_t id, ViewDesc v) { m_views[id] = std::move(v); }
  // Value `id` is (now) on chip as `t`: tiles made for it by an op (matmul_b_by_array), kept
  // and freed as a loaded value's are.
  void adopt_tiles(int32_t id, const Tiles& t) { m_tiles[id] = t; }
  void forget_view(int32_t id) { m_views.erase(id); }
  void release(const Tiles& t);
  void release(Slot s) { m_sbuf.release(s); }
  // Slots freed only after the next window's have been allocated (release_held): a window's
  // DMA-loaded stationaries then land in other bytes, so they load while the previous window
  // still multiplies instead of waiting for its last reader.
  void release_later(Slot s) { m_held.push_back(s); }
  // A slot of `bytes` kept whole for the next window's same-sized buffer (take_kept), which then
  // waits only for this one's readers; release_held frees one that was never taken.
  void keep_for_next(Slot s, int64_t bytes) { m_kept.emplace_back(s, bytes); }
  std::optional<Slot> take_kept(int64_t bytes);
  void release_held();
  void count_bytes_in(int64_t bytes) { m_bytes_in += bytes; }
  void count_bytes_out(int64_t bytes) { m_bytes_out += bytes; }

  // A derived form's name within its value (derived_forms.cpp).
  using FormKey = std::array<int64_t, 6>;

 protected:
  const Graph& m_graph;
  PlanBuilder& m_plan;  // where HBM tensors are declared
  std::set<int32_t> m_group_ids;
  std::set<int32_t> m_used_outside;  // the group's values read after it
  SbufAllocator m_sbuf;
  int32_t m_tile_rows = 128;
  std::map<int32_t, Slot> m_hbm_tensors;
  // Scratch reuse by liveness (hbm_tensor, release_dead): the values each scratch tensor in
  // use holds, and the free ones by dtype.
  std::map<int32_t, std::set<int32_t>> m_scratch_owners;
  std::map<DType, std::vector<Slot>> m_free_scratch;
  std::map<int32_t, Tiles> m_tiles;       // values on chip
  std::map<int32_t, Tiles> m_replicated;  // row vectors broadcast to every partition
  std::map<int32_t, int> m_last_use;
  std::vector<int32_t> m_order;                // the group's nodes in lowering order
  std::map<int32_t, std::vector<int>> m_uses;  // value -> positions of its consumers
  std::set<int32_t> m_pinned;                  // values the current op holds: never spilled
  std::map<int32_t, ViewDesc> m_views;
  std::set<int32_t> m_in_hbm;
  std::vector<Slot> m_held;                      // release_later
  std::vector<std::pair<Slot, int64_t>> m_kept;  // keep_for_next
  struct Kept {                                  // a plan constant or a derived form
    Slot slot;
    int32_t user = -1;  // the last node that asked for it
  };
  std::map<std::string, Kept> m_constants;              // plan_constant
  std::map<std::pair<int32_t, FormKey>, Kept> m_forms;  // derived_form
  int64_t m_spills = 0;
  int64_t m_spill_bytes = 0;
  int64_t m_bytes_in = 0;
  int64_t m_bytes_out = 0;
};

}  // namespace wallsim::compiler_stub::lowering
