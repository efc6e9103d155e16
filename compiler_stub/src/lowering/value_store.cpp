// ValueStore: tiling, HBM tensors and scratch reuse, and the liveness of one group's values.
#include "lowering/value_store.h"

#include <algorithm>

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

ValueStore::ValueStore(const Graph& graph, const std::vector<int32_t>& group, const GraphUses& uses,
                       PlanBuilder& builder, int32_t tile_rows, int64_t sbuf_bytes_per_partition)
    : m_graph(graph),
      m_plan(builder),
      m_group_ids(group.begin(), group.end()),
      m_sbuf(builder, tile_rows, sbuf_bytes_per_partition),
      m_tile_rows(tile_rows) {
  // The group's values read after it: graph outputs, and values with a consumer outside the
  // group (time proportional to the group's uses, not to the graph).
  for (int32_t id : group) {
    const auto& readers = uses.consumers(id);
    if (uses.is_output(id) || std::any_of(readers.begin(), readers.end(),
                                          [&](int32_t r) { return !m_group_ids.count(r); })) {
      m_used_outside.insert(id);
    }
  }
}

void ValueStore::index_uses(const std::vector<int32_t>& order,
                            const std::function<std::vector<int32_t>(const Node&)>& extra_reads) {
  m_order = order;
  for (size_t i = 0; i < order.size(); ++i) {
    for (int32_t in : m_graph.find(order[i])->inputs) {
      m_last_use[in] = static_cast<int>(i);
      m_uses[in].push_back(static_cast<int>(i));
    }
    for (int32_t in : extra_reads(*m_graph.find(order[i]))) {
      m_last_use[in] = static_cast<int>(i);
      m_uses[in].push_back(static_cast<int>(i));
    }
  }
}

void ValueStore::release_dead(int position) {
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

LowerStats ValueStore::stats() const {
  LowerStats s;
  s.sbuf_peak_bytes = m_sbuf.peak();
  s.hbm_bytes_in = m_bytes_in;
  s.hbm_bytes_out = m_bytes_out;
  s.spills = m_spills;
  s.spill_bytes = m_spill_bytes;
  return s;
}

Slot ValueStore::hbm_tensor(int32_t id, isa::TensorRole role) {
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
      const int64_t have = m_plan.tensor_elements(*p);
      if (pick == pool.end()) {
        pick = p;
        continue;
      }
      const int64_t best = m_plan.tensor_elements(*pick);
      if (have >= need ? (best < need || have < best) : (best < need && have > best)) pick = p;
    }
    if (pick != pool.end()) {
      Slot s = *pick;
      pool.erase(pick);
      if (m_plan.tensor_elements(s) < need) m_plan.grow_tensor(s, need);
      m_hbm_tensors[id] = s;
      m_scratch_owners[s.index].insert(id);
      return s;
    }
  }
  std::vector<int64_t> shape;
  for (const Dim& d : n.type.dims) shape.push_back(d.size);
  Slot s = m_plan.add_tensor(value_name(m_graph, id), MemSpace::hbm, n.type.dtype, shape, role);
  m_hbm_tensors[id] = s;
  if (role == isa::TensorRole::scratch && !needed_outside(id)) m_scratch_owners[s.index] = {id};
  return s;
}

void ValueStore::alias_hbm(int32_t id, Slot tensor) {
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

bool ValueStore::live_after(int32_t id, int position) const {
  auto lu = m_last_use.find(id);
  if (lu != m_last_use.end() && lu->second > position) return true;
  for (const auto& [view, desc] : m_views) {
    if (desc.base == id && view != id && live_after(view, position)) return true;
  }
  return false;
}

void ValueStore::release(const Tiles& t) {
  for (Slot s : t.tiles) m_sbuf.release(s);
}

void ValueStore::release_held() {
  for (Slot s : m_held) m_sbuf.release(s);
  m_held.clear();
  for (const auto& k : m_kept) m_sbuf.release(k.first);
  m_kept.clear();
}

std::optional<Slot> ValueStore::take_kept(int64_t bytes) {
  for (auto it = m_kept.begin(); it != m_kept.end(); ++it) {
    if (it->second != bytes) continue;
    const Slot s = it->first;
    m_kept.erase(it);
    return s;
  }
  return std::nullopt;
}

}  // namespace wallsim::compiler_stub::lowering
