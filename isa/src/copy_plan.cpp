#include "wallsim/isa/copy_plan.h"

#include <utility>

namespace wallsim::isa {

Plan copy_plan(std::string name, MemSpace src, MemSpace dst, DType dtype, int64_t rows,
               int64_t cols) {
  Plan p;
  p.name = std::move(name);
  p.tensors.push_back({"src", src, dtype, {rows, cols}, TensorRole::input});
  p.tensors.push_back({"dst", dst, dtype, {rows, cols}, TensorRole::output});
  Stream s{Engine::dma, "copy", 0, {}};
  Instruction in;
  in.op = Opcode::dma_copy;
  for (int k = 0; k < 2; ++k) {
    AccessPattern& ap = k == 0 ? in.src[0] : in.dst;
    ap.space = k == 0 ? src : dst;
    ap.buffer = k;
    ap.dtype = dtype;
    ap.partitions = static_cast<int32_t>(rows);
    ap.partition_stride = cols;
    ap.num_free = 1;
    ap.free[0] = {cols, 1};
  }
  s.instructions.push_back(in);
  p.streams.push_back(std::move(s));
  return p;
}

}  // namespace wallsim::isa
