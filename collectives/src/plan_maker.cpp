// One-collective SPMD plans.
#include "wallsim/collectives/plan_maker.h"

#include <stdexcept>

namespace wallsim::collectives {
namespace {

isa::AccessPattern row(int tensor, int64_t elements, isa::DType dtype) {
  isa::AccessPattern ap;
  ap.space = isa::MemSpace::hbm;
  ap.dtype = dtype;
  ap.buffer = tensor;
  ap.partitions = 1;
  ap.partition_stride = elements;
  ap.num_free = 1;
  ap.free[0] = {elements, 1};
  return ap;
}

}  // namespace

isa::Plan collective_plan(CollectiveOp op, int ranks, int64_t count, isa::DType dtype, int peer,
                          bool receiver) {
  const int64_t p = ranks;
  const bool splits = op == CollectiveOp::all_gather || op == CollectiveOp::reduce_scatter ||
                      op == CollectiveOp::all_to_all;
  if (p < 1 || count < 1 || (splits && count % p != 0)) {
    throw std::invalid_argument("collective_plan: " + std::to_string(count) +
                                " elements do not split over " + std::to_string(p) + " ranks");
  }
  int64_t src = count, dst = count;
  if (op == CollectiveOp::all_gather) src = count / p;
  if (op == CollectiveOp::reduce_scatter) dst = count / p;
  isa::Plan plan;
  plan.name = std::string(name_of(op)) +
              (op == CollectiveOp::send_recv ? (receiver ? "_recv" : "_send") : "") + "_" +
              std::to_string(count);
  plan.comms.push_back({"world", p});
  plan.tensors.push_back({"src", isa::MemSpace::hbm, dtype, {1, src}, isa::TensorRole::input});
  plan.tensors.push_back({"dst", isa::MemSpace::hbm, dtype, {1, dst}, isa::TensorRole::output});
  isa::Instruction in;
  in.comm = 0;
  switch (op) {
    case CollectiveOp::all_reduce:
      in.op = isa::Opcode::all_reduce;
      break;
    case CollectiveOp::all_gather:
      in.op = isa::Opcode::all_gather;
      break;
    case CollectiveOp::reduce_scatter:
      in.op = isa::Opcode::reduce_scatter;
      break;
    case CollectiveOp::all_to_all:
      in.op = isa::Opcode::all_to_all;
      break;
    case CollectiveOp::permute:
      in.op = isa::Opcode::permute;
      break;
    case CollectiveOp::send_recv:
      in.op = receiver ? isa::Opcode::recv : isa::Opcode::send;
      break;
  }
  if (in.uses(isa::F_Dst)) in.dst = row(1, dst, dtype);
  if (in.uses(isa::F_Src0)) in.src[0] = row(0, src, dtype);
  if (in.uses(isa::F_Peer)) in.peer = static_cast<int16_t>(peer);
  isa::Stream q;
  q.engine = isa::Engine::dma;
  q.name = "q0";
  q.dma_engine = 0;
  q.instructions.push_back(in);
  plan.streams.push_back(std::move(q));
  return plan;
}

}  // namespace wallsim::collectives
