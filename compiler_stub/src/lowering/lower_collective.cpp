// The collectives family (issue 38): all_reduce, all_gather and reduce_scatter as one collective
// instruction each on a DMA queue, HBM to HBM: the operand is stored to HBM first (a group's
// value, or a view, gets its own tensor), the result is a tensor consumers load from. The
// plan declares the communicator (`comm`, `ranks`); the runtime binds it to cores at launch.
// send and recv: one instruction each to or from a peer rank, all on one queue in program order.
#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub::lowering {
namespace {

int64_t elements_of(const TensorType& t) {
  int64_t n = 1;
  for (const Dim& d : t.dims) n *= d.size;
  return n;
}

// The whole tensor as one row: the collective engine moves it as bytes.
AccessPattern whole(Slot tensor, int64_t elements, DType dtype) {
  AccessPattern ap;
  ap.space = MemSpace::hbm;
  ap.dtype = dtype;
  ap.buffer = tensor.index;
  ap.partitions = 1;
  ap.partition_stride = elements;
  ap.num_free = 1;
  ap.free[0] = {elements, 1};
  return ap;
}

LowerResult lower_collective(LoweringContext& ctx, const Node& n) {
  const int32_t x = n.inputs[0];
  const TensorType& in = ctx.type_of(x);
  if (in.dtype != n.type.dtype) return ctx.error("a collective keeps its operand's dtype");
  if (!ctx.ensure_hbm(x)) return ctx.no_room();
  const Slot src = ctx.hbm_tensor(x, isa::TensorRole::input);
  const isa::TensorRole role =
      ctx.needed_outside(n.id) ? isa::TensorRole::output : isa::TensorRole::scratch;
  const Slot dst = ctx.hbm_tensor(n.id, role);
  Instruction c;
  c.op = n.op == OpKind::all_reduce   ? Opcode::all_reduce
         : n.op == OpKind::all_gather ? Opcode::all_gather
                                      : Opcode::reduce_scatter;
  c.alu = AluOp::add;
  c.comm = static_cast<int16_t>(ctx.builder().add_comm(*n.text_attr("comm"), *n.int_attr("ranks")));
  c.src[0] = whole(src, elements_of(in), in.dtype);
  c.dst = whole(dst, elements_of(n.type), n.type.dtype);
  ctx.emit(ctx.collective_queue(), c);
  const int64_t bytes = elements_of(in) * isa::dtype_bytes(in.dtype);
  ctx.count_bytes_in(bytes);
  ctx.count_bytes_out(elements_of(n.type) * isa::dtype_bytes(n.type.dtype));
  ctx.alias_hbm(n.id, dst);
  return std::nullopt;
}

// send: its operand from HBM to the peer; its value, the token int32[1], is declared (a plan
// tensor) and never written. recv: the peer's bytes into a fresh HBM tensor.
LowerResult lower_point_to_point(LoweringContext& ctx, const Node& n) {
  const isa::TensorRole role =
      ctx.needed_outside(n.id) ? isa::TensorRole::output : isa::TensorRole::scratch;
  Instruction c;
  c.comm = static_cast<int16_t>(ctx.builder().add_comm(*n.text_attr("comm"), *n.int_attr("ranks")));
  c.peer = static_cast<int16_t>(*n.int_attr("peer"));
  int64_t bytes = 0;
  if (n.op == OpKind::send) {
    const int32_t x = n.inputs[0];
    const TensorType& in = ctx.type_of(x);
    if (!ctx.ensure_hbm(x)) return ctx.no_room();
    c.op = Opcode::send;
    c.src[0] = whole(ctx.hbm_tensor(x, isa::TensorRole::input), elements_of(in), in.dtype);
    bytes = elements_of(in) * isa::dtype_bytes(in.dtype);
    ctx.emit(ctx.point_to_point_queue(), c);
    ctx.count_bytes_in(bytes);
    ctx.alias_hbm(n.id, ctx.hbm_tensor(n.id, role));
    return std::nullopt;
  }
  const Slot dst = ctx.hbm_tensor(n.id, role);
  c.op = Opcode::recv;
  c.dst = whole(dst, elements_of(n.type), n.type.dtype);
  ctx.emit(ctx.point_to_point_queue(), c);
  ctx.count_bytes_out(elements_of(n.type) * isa::dtype_bytes(n.type.dtype));
  ctx.alias_hbm(n.id, dst);
  return std::nullopt;
}

}  // namespace

void populate_collective_lowerings(LoweringTable& table) {
  table.add(OpKind::all_reduce, lower_collective);
  table.add(OpKind::all_gather, lower_collective);
  table.add(OpKind::reduce_scatter, lower_collective);
  table.add(OpKind::send, lower_point_to_point);
  table.add(OpKind::recv, lower_point_to_point);
}

}  // namespace wallsim::compiler_stub::lowering
