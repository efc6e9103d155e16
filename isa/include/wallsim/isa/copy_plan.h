// The plan of a plain tensor copy: what the runtime launches for a host transfer
// (runtime/src/device_queue.cpp) and tests launch to load the network like one.
#pragma once

#include <cstdint>
#include <string>

#include "wallsim/isa/plan.h"

namespace wallsim::isa {

// A plan named `name` copying a row-major [rows, cols] tensor of `dtype` from tensor "src"
// (input, in `src`) to tensor "dst" (output, in `dst`): one DMA descriptor, on one stream
// "copy", a row per partition.
Plan copy_plan(std::string name, MemSpace src, MemSpace dst, DType dtype, int64_t rows,
               int64_t cols);

}  // namespace wallsim::isa
