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

// Runs of rows with the view's strides (adjacent contiguous sub-dims merged, so a plain reshape
// is one run). False when the view needs more free dims than a descriptor has.
bool LoweringContext::copy_view(int32_t id, isa::TensorRole role) {
  const ViewDesc& v = m_views.at(id);
  const ViewRows vr = view_rows(v, true);
  if (vr.free.size() > isa::kMaxFreeDims) return false;
  const DType dtype = type_of(id).dtype;
  const int64_t run = vr.run().size;
  Slot src = hbm_tensor(v.base, isa::TensorRole::input);
  Slot dst = hbm_tensor(id, role);
  const View out{vr.rows, vr.cols};
  const int64_t chunk = std::max<int64_t>(
      1, m_options.dma_split_bytes / std::max<int64_t>(1, vr.cols * isa::dtype_bytes(dtype)));
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

}  // namespace wallsim::compiler_stub::lowering
