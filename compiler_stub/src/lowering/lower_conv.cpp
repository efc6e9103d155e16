// The convolution-window family: im2col and broadcast as strided views of a tensor in HBM.
// A convolution is im2col, a reshape and a matmul (an implicit GEMM: the window matrix is
// never written; each row tile of it is one strided DMA straight into SBUF), a pooling is
// im2col and a reduction over the window, an explicit broadcast is a view with stride-0 dims.
#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub::lowering {
namespace {

// The one sub-dim of a view's logical dim, or nullopt when a reshape merged several.
std::optional<SubDim> single(const std::vector<SubDim>& group) {
  std::optional<SubDim> out;
  for (const SubDim& d : group) {
    if (d.size == 1) continue;
    if (out) return std::nullopt;
    out = d;
  }
  return out ? out : SubDim{1, 0};
}

std::vector<int64_t> pair_or_ones(const Node& n, const char* key) {
  const std::vector<int64_t>* v = n.ints_attr(key);
  return v ? *v : std::vector<int64_t>{1, 1};
}

// [N, C, H, W] -> [N, C, OH, OW, KH, KW]: output pixel (oh, ow) reads rows oh * sh + kh * dh
// and columns ow * sw + kw * dw.
LowerResult lower_im2col(LoweringContext& ctx, const Node& n) {
  ViewDesc in = ctx.view_of_value(n.inputs[0]);
  // N and C are read as they are, merged or not (a channel shuffle's C is two sub-dims); the
  // window strides H and W, each of which must be one sub-dim.
  std::vector<SubDim> axes;
  for (size_t k = 2; k < in.groups.size(); ++k) {
    auto d = single(in.groups[k]);
    if (!d)
      return ctx.error(
          "im2col of a view whose H or W merges several strided dims is "
          "not supported");
    axes.push_back(*d);
  }
  const auto s = pair_or_ones(n, "strides"), dil = pair_or_ones(n, "dilations");
  const auto& dims = n.type.dims;
  ViewDesc v;
  v.base = in.base;
  v.offset = in.offset;
  v.groups = {in.groups[0],
              in.groups[1],
              {{dims[2].size, s[0] * axes[0].stride}},
              {{dims[3].size, s[1] * axes[1].stride}},
              {{dims[4].size, dil[0] * axes[0].stride}},
              {{dims[5].size, dil[1] * axes[1].stride}}};
  if (!ctx.ensure_hbm(v.base)) return ctx.no_room();
  ctx.set_view(n.id, v);
  return std::nullopt;
}

// Numpy broadcasting as a view: new leading dims and size-1 dims that grow read with stride 0.
LowerResult lower_broadcast(LoweringContext& ctx, const Node& n) {
  ViewDesc in = ctx.view_of_value(n.inputs[0]);
  const auto& from = ctx.type_of(n.inputs[0]).dims;
  const auto& to = n.type.dims;
  const size_t lead = to.size() - from.size();
  ViewDesc v;
  v.base = in.base;
  v.offset = in.offset;
  for (size_t k = 0; k < to.size(); ++k) {
    if (k < lead || (from[k - lead].size == 1 && to[k].size != 1)) {
      v.groups.push_back({{to[k].size, 0}});
    } else {
      v.groups.push_back(in.groups[k - lead]);
    }
  }
  if (!ctx.ensure_hbm(v.base)) return ctx.no_room();
  ctx.set_view(n.id, v);
  return std::nullopt;
}

}  // namespace

void populate_conv_lowerings(LoweringTable& table) {
  table.add(OpKind::im2col, lower_im2col);
  table.add(OpKind::broadcast, lower_broadcast);
}

}  // namespace wallsim::compiler_stub::lowering
