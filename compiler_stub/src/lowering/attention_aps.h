// Access patterns the attention lowerings share (lower_attention.cpp, decode_row_attention.cpp,
// lower_fused_attention.cpp).
#pragma once

#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub::lowering {

// `cols` elements from `off` on partitions [p0, p0 + parts) of SBUF buffer `s`.
inline AccessPattern ap(Slot s, DType dt, int32_t parts, int64_t off, int64_t cols,
                        int32_t p0 = 0) {
  AccessPattern a = LoweringContext::sbuf_ap(s, dt, parts, off, cols);
  a.partition_start = p0;
  return a;
}
// [parts x groups x width] with a group stride (0: the same block for every group).
inline AccessPattern blocks(AccessPattern a, int64_t groups, int64_t gstride, int64_t width,
                            int64_t stride = 1) {
  a.num_free = 2;
  a.free[0] = {groups, gstride};
  a.free[1] = {width, stride};
  return a;
}

}  // namespace wallsim::compiler_stub::lowering
