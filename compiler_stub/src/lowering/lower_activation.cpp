// The immediate-operand family: clip and affine (x * value + offset) as vector-engine
// tensor_scalar instructions, a row tile and a column chunk at a time (ONNX's Clip, ReLU6,
// HardSigmoid and the batch-norm epsilon map onto them).
#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub::lowering {
namespace {

struct ScalarStep {
  AluOp alu;
  double value;
};

// out = in, then each step applied in order (the first reads the input, the rest the output).
LowerResult lower_steps(LoweringContext& ctx, const Node& n, const std::vector<ScalarStep>& steps) {
  auto in = ctx.tiles_of(n.inputs[0]);
  if (!in) return ctx.no_room();
  auto out = ctx.output_tiles(n, ctx.like_of(n));
  if (!out) return ctx.no_room();
  ctx.for_each_chunk(*out, [&](int64_t t, int32_t rows, int64_t c0, int64_t nc) {
    const AccessPattern dst = ctx.tile_ap(*out, t, c0, nc);
    if (steps.empty()) {
      Instruction copy = LoweringContext::vec(Opcode::tensor_copy, dst);
      copy.src[0] = ctx.tile_ap(*in, t, c0, nc);
      ctx.emit(ctx.stream(Engine::vector), copy);
      return;
    }
    for (size_t k = 0; k < steps.size(); ++k) {
      ctx.tensor_scalar(steps[k].alu, dst, k == 0 ? ctx.tile_ap(*in, t, c0, nc) : dst,
                        steps[k].value);
    }
  });
  return std::nullopt;
}

LowerResult lower_clip(LoweringContext& ctx, const Node& n) {
  std::vector<ScalarStep> steps;
  if (const double* lo = n.real_attr("lo")) steps.push_back({AluOp::max, *lo});
  if (const double* hi = n.real_attr("hi")) steps.push_back({AluOp::min, *hi});
  return lower_steps(ctx, n, steps);
}

LowerResult lower_affine(LoweringContext& ctx, const Node& n) {
  std::vector<ScalarStep> steps;
  if (const double* v = n.real_attr("value")) steps.push_back({AluOp::mul, *v});
  if (const double* b = n.real_attr("offset")) steps.push_back({AluOp::add, *b});
  return lower_steps(ctx, n, steps);
}

}  // namespace

void populate_activation_lowerings(LoweringTable& table) {
  table.add(OpKind::clip, lower_clip);
  table.add(OpKind::affine, lower_affine);
}

}  // namespace wallsim::compiler_stub::lowering
