// Strided views of tensors in HBM (what reshape, transpose and slice produce): loading a view
// as row tiles, and copying one HBM to HBM.
#include <algorithm>

#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub::lowering {

int64_t inner_size(const std::vector<SubDim>& group) {
  int64_t inner = 1;
  for (size_t k = 1; k < group.size(); ++k) inner *= group[k].size;
  return inner;
}

namespace {

// `dims` (outermost first) with each sub-dim that continues its inner neighbour's stride merged
// into it, so a contiguous run is one sub-dim.
std::vector<SubDim> joined(const std::vector<SubDim>& dims) {
  std::vector<SubDim> out;
  for (const SubDim& d : dims) {
    if (!out.empty() && out.back().stride == d.size * d.stride) {
      out.back() = {out.back().size * d.size, d.stride};
    } else {
      out.push_back(d);
    }
  }
  return out;
}

}  // namespace

ViewDesc LoweringContext::view_of_value(int32_t id) const {
  auto it = m_views.find(id);
  if (it != m_views.end()) return it->second;
  ViewDesc v;
  v.base = id;
  const auto& dims = type_of(id).dims;
  int64_t stride = 1;
  v.groups.resize(dims.size());
  for (size_t i = dims.size(); i-- > 0;) {
    v.groups[i] = {{dims[i].size, stride}};
    stride *= dims[i].size;
  }
  return v;
}

ViewRows LoweringContext::view_rows(const ViewDesc& v, bool merge) {
  ViewRows r;
  for (size_t g = 0; g < v.groups.size(); ++g) {
    for (const SubDim& d : v.groups[g]) {
      if (d.size != 1) (g + 1 < v.groups.size() ? r.lead : r.free).push_back(d);
    }
  }
  if (merge) {
    r.lead = joined(r.lead);
    r.free = joined(r.free);
  }
  if (r.lead.empty()) r.lead.push_back({1, 0});
  for (const SubDim& d : r.lead) r.rows *= d.size;
  for (const SubDim& d : r.free) r.cols *= d.size;
  return r;
}

AccessPattern LoweringContext::view_rows_ap(const ViewDesc& v, const ViewRows& vr, Slot src,
                                            DType dtype, int64_t row, int32_t n) {
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

// Rows are the leading dims, the free pattern is the last dim's sub-dims. Tiles follow the
// value's own row tiling (they never cross a batch: its innermost leading logical dim), as the
// output's and the row windows' tiles do; a tile spanning several runs of the view (the
// innermost leading sub-dim, one DMA's row stride) is loaded by one DMA per run. Tiling by
// runs instead would give a conv's window matrix one tile per output row and a strided
// weight one K chunk per kernel row.
std::optional<Tiles> LoweringContext::load_view(const ViewDesc& v, DType dtype, int32_t id) {
  const ViewRows vr = view_rows(v, false);
  if (vr.free.size() > isa::kMaxFreeDims) {
    m_load_error = "a view needs more than " + std::to_string(isa::kMaxFreeDims) + " free dims";
    return std::nullopt;
  }
  const int64_t run = vr.run().size;
  const int64_t rows = vr.rows, cols = vr.cols;
  int64_t logical = 0;  // rows per batch of the value (0: unbatched)
  if (v.groups.size() >= 3) {
    logical = 1;
    for (const SubDim& d : v.groups[v.groups.size() - 2]) logical *= d.size;
  }
  const int64_t c0 = window_col0(id), wcols = window_cols(id, cols);
  if (wcols != cols && vr.free.size() != 1) {
    m_load_error = "a column window of a view with " + std::to_string(vr.free.size()) +
                   " free dims is not supported";
    return std::nullopt;
  }
  auto tiles = new_tiles(rows, cols, dtype, "view", logical, id);
  if (!tiles) return std::nullopt;
  Slot src = hbm_tensor(v.base, isa::TensorRole::input);
  for (int64_t t = 0; t < tiles->count(); ++t) {
    const int64_t r0 = tiles->row0(t), r1 = r0 + tiles->rows_in(t);
    for (int64_t r = r0; r < r1;) {
      const int32_t n = static_cast<int32_t>(std::min(r1, (r / run + 1) * run) - r);
      AccessPattern s = view_rows_ap(v, vr, src, dtype, r, n);
      if (wcols != cols) {  // columns [c0, c0 + wcols) of the view's one free dim
        s.offset += c0 * s.free[0].stride;
        s.free[0].size = wcols;
      }
      AccessPattern d = tile_ap(*tiles, t, 0, wcols);
      d.partition_start = static_cast<int32_t>(r - r0);
      d.partitions = n;
      if (s.num_free == 1 && s.free[0].stride == 1 && s.partition_stride >= s.free[0].size) {
        copy_rows(true, d, s);  // whole rows at a row stride: split over the queues
      } else {
        dma(next_load_queue(), d, s);
      }
      r += n;
    }
  }
  m_bytes_in += tiles->stored_rows() * wcols * isa::dtype_bytes(dtype);
  return tiles;
}

// The view's elements in order, as few descriptors as a DMA access pattern can express. All
// sub-dims of all dims, outermost first, with contiguous neighbours merged: a plain reshape is
// one dim, a conv's window matrix [C, OH, OW, KH, KW] five. A descriptor takes the innermost
// dims from a split dim inward (its rows, at the split dim's stride, and up to kMaxFreeDims
// free dims); dims outside it get one descriptor per index, and the split dim is cut into
// pieces that cost a DMA engine about the same (payload plus chunk overheads; at least one
// row each).
// The destination is the value's own row-major tensor, written contiguously. The DMA model
// charges each descriptor its issue cost once and each contiguous piece its chunk overhead
// (docs/TIMING.md §5), so a window matrix costs its chunks, not a descriptor per window row.
bool LoweringContext::copy_view(int32_t id, isa::TensorRole role) {
  const ViewDesc& v = m_views.at(id);
  std::vector<SubDim> dims;
  for (const auto& g : v.groups) {
    for (const SubDim& d : g) {
      if (d.size != 1) dims.push_back(d);
    }
  }
  dims = joined(dims);
  if (dims.empty()) dims.push_back({1, 1});
  const DType dtype = type_of(id).dtype;
  const int64_t esize = isa::dtype_bytes(dtype);
  const size_t k = dims.size();
  std::vector<int64_t> inner(k + 1, 1);  // elements of dims [i, k)
  for (size_t i = k; i-- > 0;) inner[i] = inner[i + 1] * dims[i].size;
  // Contiguous elements of dims [i, k), innermost first; and what they cost a DMA engine as
  // one descriptor: the payload plus a chunk overhead per contiguous piece of the source (the
  // destination is contiguous), as dma::descriptor_cost charges them.
  auto run_of = [&](size_t i) {
    int64_t run = 1;
    for (size_t j = k; j-- > i && dims[j].stride == run;) run *= dims[j].size;
    return run;
  };
  auto engine_bytes = [&](size_t i) {
    return m_arch.costs.dma_engine_bytes(inner[i] * esize, (inner[i] + run_of(i) - 1) / run_of(i));
  };
  // A view copy is usually its op's whole work, on the critical path: it spreads over every
  // store queue, one piece of equal engine work each (descriptors issue in parallel), but no
  // piece is cut below dma_min_chunk_bytes of engine work (cutting a run adds a chunk).
  const int64_t queues = this->queues().store_queue_count();
  const int64_t split = std::max<int64_t>(
      {int64_t{1}, m_options.dma_min_chunk_bytes, (engine_bytes(0) + queues - 1) / queues});
  size_t l = k > size_t{isa::kMaxFreeDims} + 1 ? k - isa::kMaxFreeDims - 1 : 0;
  while (l + 1 < k && engine_bytes(l + 1) > split) ++l;
  const int64_t row = inner[l + 1];  // elements of one row of the split dim
  // Rows that continue each other's run add no chunk of their own.
  const int64_t row_cost = run_of(l) >= inner[l] ? row * esize : engine_bytes(l + 1);
  const int64_t chunk = std::clamp<int64_t>(split / std::max<int64_t>(1, row_cost), 1,
                                            std::min<int64_t>(dims[l].size, INT32_MAX));
  Slot src = hbm_tensor(v.base, isa::TensorRole::input);
  Slot dst = hbm_tensor(id, role);
  for (int64_t o = 0; o < inner[0] / inner[l]; ++o) {
    int64_t base = v.offset;
    for (int64_t r = o, i = static_cast<int64_t>(l); i-- > 0;) {
      base += (r % dims[i].size) * dims[i].stride;
      r /= dims[i].size;
    }
    for (int64_t c = 0; c < dims[l].size; c += chunk) {
      const int32_t n = static_cast<int32_t>(std::min(chunk, dims[l].size - c));
      AccessPattern s;
      s.space = MemSpace::hbm;
      s.buffer = src.index;
      s.dtype = dtype;
      s.partitions = n;
      s.partition_stride = dims[l].stride;
      s.offset = base + c * dims[l].stride;
      s.num_free = static_cast<uint8_t>(std::max<size_t>(1, k - l - 1));
      s.free[0] = {1, 1};
      for (size_t j = l + 1; j < k; ++j) s.free[j - l - 1] = {dims[j].size, dims[j].stride};
      const View out{inner[0] / row, row};
      dma(next_store_queue(), hbm_ap(dst, dtype, out, o * dims[l].size + c, n, 0, row), s);
    }
  }
  const int64_t bytes = inner[0] * esize;
  m_bytes_in += bytes;
  m_bytes_out += bytes;
  m_in_hbm.insert(id);
  return true;
}

}  // namespace wallsim::compiler_stub::lowering
