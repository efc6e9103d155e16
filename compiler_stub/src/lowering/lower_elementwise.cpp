// The element-wise family: binary ALU ops with broadcasting, activations, scale, reductions
// over the last axis, softmax, layernorm/rmsnorm, iota, compare and select, on the vector and
// scalar engines, a row tile and a column chunk at a time.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub::lowering {

void emit_softmax_rows(LoweringContext& ctx, const AccessPattern& x, const AccessPattern& y,
                       const AccessPattern& w, Slot stats, bool log) {
  const int64_t C = x.free_elements();
  auto col = [&](int64_t c) {
    return LoweringContext::sbuf_ap(stats, DType::fp32, x.partitions, c, 1);
  };
  ctx.reduce(AluOp::max, col(0), x);
  ctx.tensor_tensor(AluOp::sub, w, x, LoweringContext::broadcast_column(col(0), C));  // x - max
  AccessPattern sum = col(1);
  if (!log) {
    ctx.activation(ActFn::exp, w, w, 1, 0, &sum);
    ctx.tensor_scalar(AluOp::div, col(2), col(1), 1.0, /*reverse=*/true);
    ctx.tensor_tensor(AluOp::mul, y, w, LoweringContext::broadcast_column(col(2), C));
  } else {
    ctx.activation(ActFn::exp, y, w, 1, 0, &sum);  // exp(x - max) lands in y first, then
    ctx.activation(ActFn::log, col(2), col(1));    // y = (x - max) - log(sum)
    ctx.tensor_tensor(AluOp::sub, y, w, LoweringContext::broadcast_column(col(2), C));
  }
}

// A norm's row tile with whole rows of gamma and beta (replicated) and two fp32 scratch rows
// beside x and the output: more than SBUF, it runs by column chunks (lower_norm_chunked),
// each chunk's scratch, gamma and beta taking at most a quarter of a row window.
int64_t norm_chunk_cols(const LoweringContext& ctx, const Node& n) {
  const int64_t C = view_of(n.type).cols;
  auto row = [&](int32_t id) {
    return SbufAllocator::aligned(C * isa::dtype_bytes(ctx.type_of(id).dtype));
  };
  const size_t operands = n.op == OpKind::layernorm ? 3 : 2;
  int64_t whole = row(n.id) + 2 * SbufAllocator::aligned(C * 4) + 64;
  for (size_t k = 0; k < operands && k < n.inputs.size(); ++k) whole += row(n.inputs[k]);
  if (whole <= ctx.sbuf_capacity()) return 0;
  const int64_t share = ctx.sbuf_capacity() * ctx.options().row_window_fill_percent / 400;
  const int64_t per_col = 4 * static_cast<int64_t>(operands);  // scratch, gamma, beta
  const int64_t cb = std::max<int64_t>(1, std::min({C, ctx.free_chunk(), share / per_col}));
  const int64_t chunks = (C + cb - 1) / cb;
  return (C + chunks - 1) / chunks;  // balanced
}

namespace {

// One vector ALU op over two broadcast operands.
LowerResult lower_binary(LoweringContext& ctx, const Node& n, AluOp alu) {
  auto out = ctx.output_tiles(n, ctx.like_of(n));
  if (!out) return ctx.no_room();
  Bcast ha, hb;
  std::optional<Tiles> a, b;
  if (auto e = ctx.operand(n.inputs[0], *out, ha, a)) return e;
  if (auto e = ctx.operand(n.inputs[1], *out, hb, b)) return e;
  ctx.for_each_chunk(*out, [&](int64_t t, int32_t rows, int64_t c0, int64_t nc) {
    ctx.tensor_tensor(alu, ctx.tile_ap(*out, t, c0, nc), ctx.operand_ap(*a, ha, t, c0, nc, rows),
                      ctx.operand_ap(*b, hb, t, c0, nc, rows));
  });
  return std::nullopt;
}

// One activation function on the scalar engine.
LowerResult lower_unary(LoweringContext& ctx, const Node& n, ActFn fn) {
  auto in = ctx.tiles_of(n.inputs[0]);
  if (!in) return ctx.no_room();
  auto out = ctx.output_tiles(n, ctx.like_of(n));
  if (!out) return ctx.no_room();
  ctx.for_each_chunk(*out, [&](int64_t t, int32_t rows, int64_t c0, int64_t nc) {
    ctx.activation(fn, ctx.tile_ap(*out, t, c0, nc), ctx.tile_ap(*in, t, c0, nc));
  });
  return std::nullopt;
}

// x * value on the vector engine, which (unlike the activation path) takes any dtype.
LowerResult lower_scale(LoweringContext& ctx, const Node& n) {
  auto in = ctx.tiles_of(n.inputs[0]);
  if (!in) return ctx.no_room();
  auto out = ctx.output_tiles(n, ctx.like_of(n));
  if (!out) return ctx.no_room();
  const double value = n.real_attr("value") ? *n.real_attr("value") : 1.0;
  ctx.for_each_chunk(*out, [&](int64_t t, int32_t rows, int64_t c0, int64_t nc) {
    ctx.tensor_scalar(AluOp::mul, ctx.tile_ap(*out, t, c0, nc), ctx.tile_ap(*in, t, c0, nc), value);
  });
  return std::nullopt;
}

LowerResult lower_reduce(LoweringContext& ctx, const Node& n, AluOp alu, bool mean) {
  auto in = ctx.tiles_of(n.inputs[0]);
  if (!in) return ctx.no_room();
  if (auto e = ctx.needs_one_chunk(in->cols)) return e;
  auto out = ctx.output_tiles(n, ctx.like_of(n));
  if (!out) return ctx.no_room();
  for (int64_t t = 0; t < out->count(); ++t) {
    ctx.reduce(alu, ctx.tile_ap(*out, t, 0, 1), ctx.tile_ap(*in, t, 0, in->cols));
    if (mean)
      ctx.tensor_scalar(AluOp::mul, ctx.tile_ap(*out, t, 0, 1), ctx.tile_ap(*out, t, 0, 1),
                        1.0 / double(in->cols));
  }
  return std::nullopt;
}

LowerResult lower_softmax(LoweringContext& ctx, const Node& n, bool log) {
  auto in = ctx.tiles_of(n.inputs[0]);
  if (!in) return ctx.no_room();
  const int64_t C = in->cols;
  if (auto e = ctx.needs_one_chunk(C)) return e;
  auto out = ctx.output_tiles(n, ctx.like_of(n));
  auto stats = ctx.scratch(3);
  auto work = ctx.scratch(C);
  if (!out || !stats || !work) return ctx.no_room();
  for (int64_t t = 0; t < out->count(); ++t) {
    const int32_t rows = out->rows_in(t);
    AccessPattern w = ctx.tile_ap(*work, 0, 0, C);
    w.partitions = rows;
    emit_softmax_rows(ctx, ctx.tile_ap(*in, t, 0, C), ctx.tile_ap(*out, t, 0, C), w,
                      stats->tiles[0], log);
  }
  ctx.release(*stats);
  ctx.release(*work);
  return std::nullopt;
}

// A norm whose row tile is too wide for whole rows of gamma, beta and scratch: the statistics
// are summed a column chunk at a time through one chunk of scratch, then each chunk of gamma
// and beta is loaded once, replicated on every partition, and applied to that chunk of every
// row tile. x and the output stay whole rows.
LowerResult lower_norm_chunked(LoweringContext& ctx, const Node& n, int64_t cb) {
  const bool layer = n.op == OpKind::layernorm;
  const size_t operands = layer ? 3 : 2;
  for (size_t k = 1; k < operands; ++k) {
    if (view_of(ctx.type_of(n.inputs[k])).rows != 1 || ctx.on_chip(n.inputs[k])) {
      return ctx.error("a norm this wide needs its gamma and beta as row vectors in HBM");
    }
    if (!ctx.ensure_hbm(n.inputs[k])) return ctx.no_room();
  }
  auto in = ctx.tiles_of(n.inputs[0]);
  if (!in) return ctx.no_room();
  const int64_t C = in->cols;
  auto out = ctx.output_tiles(n, &*in);
  if (!out) return ctx.no_room();
  auto stats = ctx.new_tiles_like(*out, 4, DType::fp32, "stats");  // mean, ss, rstd, partial
  auto work = ctx.scratch(cb);
  if (!stats || !work) return ctx.no_room();
  const double eps = norm_eps(n);
  auto bcast = [](const AccessPattern& col, int64_t c) {
    return LoweringContext::broadcast_column(col, c);
  };
  for (int64_t t = 0; t < out->count(); ++t) {
    const int32_t rows = out->rows_in(t);
    auto col = [&](int64_t c) { return ctx.tile_ap(*stats, t, c, 1); };
    auto w = [&](int64_t nc) {
      AccessPattern ap = ctx.tile_ap(*work, 0, 0, nc);
      ap.partitions = rows;
      return ap;
    };
    // Sums over the chunks: the first into `into`, the others through the partial column.
    auto sum_chunks = [&](int64_t into,
                          const std::function<void(int64_t, int64_t, const AccessPattern&)>& f) {
      for (int64_t c0 = 0; c0 < C; c0 += cb) {
        const AccessPattern acc = col(c0 == 0 ? into : 3);
        f(c0, std::min(cb, C - c0), acc);
        if (c0 > 0) ctx.tensor_tensor(AluOp::add, col(into), col(into), acc);
      }
    };
    if (layer) {
      sum_chunks(0, [&](int64_t c0, int64_t nc, const AccessPattern& acc) {
        ctx.activation(ActFn::identity, w(nc), ctx.tile_ap(*in, t, c0, nc), 1.0 / double(C), 0,
                       &acc);
      });
    }
    sum_chunks(1, [&](int64_t c0, int64_t nc, const AccessPattern& acc) {
      AccessPattern x = ctx.tile_ap(*in, t, c0, nc);
      if (layer) {
        ctx.tensor_tensor(AluOp::sub, w(nc), x, bcast(col(0), nc));
        x = w(nc);
      }
      ctx.activation(ActFn::square, w(nc), x, 1, 0, &acc);
    });
    ctx.activation(ActFn::rsqrt, col(2), col(1), 1.0 / double(C), eps);
  }
  const int32_t parts = ctx.tile_rows();
  for (int64_t c0 = 0; c0 < C; c0 += cb) {
    const int64_t nc = std::min(cb, C - c0);
    std::vector<Slot> rowvec;  // this chunk of gamma (and beta) on every partition
    for (size_t k = 1; k < operands; ++k) {
      const TensorType& type = ctx.type_of(n.inputs[k]);
      auto s = ctx.sbuf_alloc(nc * isa::dtype_bytes(type.dtype), "bcast");
      if (!s) return ctx.no_room();
      AccessPattern src = ctx.hbm_ap(ctx.hbm_tensor(n.inputs[k], isa::TensorRole::input),
                                     type.dtype, view_of(type), 0, parts, c0, nc);
      src.partition_stride = 0;
      ctx.dma(ctx.next_load_queue(), LoweringContext::sbuf_ap(*s, type.dtype, parts, 0, nc), src);
      ctx.count_bytes_in(nc * isa::dtype_bytes(type.dtype));
      rowvec.push_back(*s);
    }
    auto vec_ap = [&](size_t k, int32_t rows) {
      return LoweringContext::sbuf_ap(rowvec[k], ctx.type_of(n.inputs[k + 1]).dtype, rows, 0, nc);
    };
    for (int64_t t = 0; t < out->count(); ++t) {
      const int32_t rows = out->rows_in(t);
      AccessPattern w = ctx.tile_ap(*work, 0, 0, nc), y = ctx.tile_ap(*out, t, c0, nc);
      w.partitions = rows;
      AccessPattern x = ctx.tile_ap(*in, t, c0, nc);
      if (layer) {
        ctx.tensor_tensor(AluOp::sub, w, x, bcast(ctx.tile_ap(*stats, t, 0, 1), nc));
        x = w;
      }
      ctx.tensor_tensor(AluOp::mul, w, x, bcast(ctx.tile_ap(*stats, t, 2, 1), nc));
      if (layer) {
        ctx.tensor_tensor(AluOp::mul, w, w, vec_ap(0, rows));
        ctx.tensor_tensor(AluOp::add, y, w, vec_ap(1, rows));
      } else {
        ctx.tensor_tensor(AluOp::mul, y, w, vec_ap(0, rows));
      }
    }
    for (Slot s : rowvec) ctx.release(s);
  }
  ctx.release(*stats);
  ctx.release(*work);
  return std::nullopt;
}

// A norm with gamma (and beta) as rows, its per-row factors applied by the array. Per row
// tile: the statistics from the scalar engine's accumulate (-mean and E[x^2]: var = E[x^2] -
// mean^2; layernorm: of xs = x - p, p the row's first element, which the array forms in PSUM
// as I . x + (-p) (x) 1 for the scalar engine to read, so a mean that dwarfs the spread does
// not cancel the variance away), xg = x * gamma (one vector pass, independent of them), D =
// diag(rstd) (the identity times the rstd column), and per PSUM bank of columns y = 1 (x) beta +
// (-mean * rstd) (x) gamma
// + D . xg: two K = 1 matmuls (-mean * rstd transposed into a row) and one with D stationary,
// accumulated, then evacuated by a plain copy on either lane engine (rmsnorm: y = D . xg).
// The vector engine makes one pass over the row instead of four. D and xg are rounded to
// gamma's dtype (the matmul's operands share one). The next tile's work is emitted before this
// tile's evacuation, in a second set of banks when there are enough.
// Returns false (nothing emitted) when gamma or beta is not a row or the banks are too few.
// One row ([1, C], a decode token's) takes the same path: gamma and beta are then rows as they
// are.
bool norm_by_array(LoweringContext& ctx, const Tiles& in, const Tiles& out, const Tiles& gamma,
                   Bcast hg, const Tiles* beta, Bcast hb, double eps, LowerResult& result) {
  const bool layer = beta != nullptr;
  const DType gdt = gamma.dtype;
  // A row replicated on every partition, or (one output row) the row itself on partition 0.
  const bool one_row = out.count() == 1 && out.rows_in(0) == 1;
  auto is_row = [&](Bcast h) { return h == Bcast::row || (h == Bcast::none && one_row); };
  // Layernorm's x is a matmul operand (the shift by the array) beside gamma's identity.
  if (!is_row(hg) || (layer && (!is_row(hb) || beta->dtype != gdt || in.dtype != gdt)) ||
      !isa::is_float(gdt)) {
    return false;
  }
  const int64_t C = in.cols, bc = moving_cols(ctx);
  const int64_t blocks = (C + bc - 1) / bc;
  // Banks: `sets` of `blocks` for the result, and (layernorm) one set for xs.
  const int64_t xs_sets = layer ? 1 : 0;
  const int64_t sets = (2 + xs_sets) * blocks <= ctx.psum_bank_count() ? 2 : 1;
  if ((1 + xs_sets) * blocks > ctx.psum_bank_count() || in.count() == 0) return false;
  result = std::nullopt;
  // The identity, ones row and diagonals span the most rows a tile has (one for a decode
  // token's row): building a full-tile identity put 128 x 128 iota work on a one-row chain.
  int32_t parts = 1;
  for (int64_t t = 0; t < in.count(); ++t) parts = std::max<int32_t>(parts, in.rows_in(t));
  const int64_t eb = isa::dtype_bytes(gdt);
  // Per set of stats columns: -mean, E[x^2], rstd, -mean * rstd, and per block its two sums.
  const int64_t stat_cols = 4 + (blocks > 1 ? 2 * blocks : 0);
  auto stats = ctx.scratch(2 * stat_cols);
  auto sq = ctx.scratch(C);
  auto fill = [&](Opcode op, const AccessPattern& dst, double value, double pstep, double step) {
    Instruction in = LoweringContext::vec(op, dst);
    in.value = value;
    in.partition_step = pstep;
    in.step = step;
    ctx.emit(ctx.stream(Engine::vector), in);
  };
  // The identity and a ones row: plan constants, built by the plan's first norm.
  auto ident = ctx.identity(parts, gdt);
  auto diag = ctx.sbuf_alloc(2 * SbufAllocator::aligned(parts * eb), "norm_diag");
  auto xg = ctx.sbuf_alloc(2 * SbufAllocator::aligned(C * eb), "norm_xg");
  auto rowbuf = ctx.sbuf_alloc(2 * SbufAllocator::aligned(parts * eb), "norm_rows");
  std::optional<Slot> ones;
  if (layer) {
    const int64_t ones_len = std::max<int64_t>(parts, std::min(bc, C));
    ones = ctx.plan_constant(
        "norm_ones " + std::to_string(ones_len) + " " + std::string(isa::name_of(gdt)),
        SbufAllocator::aligned(ones_len * eb), [&](Slot s) {
          fill(Opcode::memset, LoweringContext::sbuf_ap(s, gdt, 1, 0, ones_len), 1.0, 0, 0);
          return true;
        });
  }
  auto pivots = ctx.sbuf_alloc(2 * SbufAllocator::aligned(parts * eb), "norm_pivots");
  if (!stats || !sq || !ident || !diag || !xg || !rowbuf || (layer && !ones) || !pivots) {
    result = ctx.no_room();
    return true;
  }
  auto set_offset = [&](int64_t t, int64_t elems) {
    return (t % 2) * (SbufAllocator::aligned(elems * eb) / eb);
  };
  auto bank = [&](int64_t t, int64_t j) {
    return ctx.psum_bank(static_cast<size_t>((t % sets) * blocks + j));
  };
  auto xs_bank = [&](int64_t j) { return ctx.psum_bank(static_cast<size_t>(sets * blocks + j)); };
  // Row tile t up to its sums in PSUM.
  auto accumulate = [&](int64_t t) {
    const int32_t rows = in.rows_in(t);
    const int64_t base = (t % 2) * stat_cols;
    auto col = [&](int64_t c) {
      AccessPattern ap = ctx.tile_ap(*stats, 0, base + c, 1);
      ap.partitions = rows;
      return ap;
    };
    AccessPattern s = ctx.tile_ap(*sq, 0, 0, C);
    s.partitions = rows;
    const AccessPattern x = ctx.tile_ap(in, t, 0, C);
    const AccessPattern xgt = LoweringContext::sbuf_ap(*xg, gdt, rows, set_offset(t, C), C);
    ctx.tensor_tensor(AluOp::mul, xgt, x, ctx.operand_ap(gamma, hg, t, 0, C, rows));
    const AccessPattern nmean = col(0), msq = col(1), rstd = col(2), nmr = col(3);
    if (layer) {
      // xs = x - p in PSUM: p (column 0) transposed into a row, negated on its way to SBUF. The
      // scalar engine sums xs and (in place) its square. Shifting xg too would also spare the
      // output's two large terms (-mean * rstd * gamma, rstd * x * gamma) their cancellation, but
      // makes the vector pass wait for the scalar's: 0.35 ms more on GPT-2's step.
      const AccessPattern x0 = ctx.tile_ap(in, t, 0, 1);
      const AccessPattern prow_psum = LoweringContext::psum_ap(xs_bank(0), 1, rows, 0);
      ctx.emit_transpose(prow_psum, x0);
      const AccessPattern nprow =
          LoweringContext::sbuf_ap(*pivots, gdt, 1, set_offset(t, parts), rows);
      ctx.activation(ActFn::identity, nprow, prow_psum, -1.0);
      for (int64_t j = 0; j < blocks; ++j) {
        const int64_t c0 = j * bc, nc = std::min(bc, C - c0);
        const AccessPattern xs = LoweringContext::psum_ap(xs_bank(j), rows, nc);
        ctx.emit_matmul(xs, LoweringContext::sbuf_ap(*ident, gdt, rows, 0, rows),
                        ctx.tile_ap(in, t, c0, nc), true, false);
        ctx.emit_matmul(xs, nprow, LoweringContext::sbuf_ap(*ones, gdt, 1, 0, nc), false, true);
        AccessPattern sj = ctx.tile_ap(*sq, 0, c0, nc);
        sj.partitions = rows;
        const AccessPattern sum = blocks > 1 ? col(4 + 2 * j) : nmean;
        const AccessPattern sumsq = blocks > 1 ? col(5 + 2 * j) : msq;
        ctx.activation(ActFn::identity, sj, xs, -1.0 / double(C), 0, &sum);
        ctx.activation(ActFn::square, xs, xs, 1.0 / std::sqrt(double(C)), 0, &sumsq);
      }
      // The blocks' partial sums: -mean and E[x^2] sit side by side, as do each block's two
      // sums, so one add over both columns a block (on a one-row chain, each add is ~0.1 us).
      auto pair = [&](int64_t c) {
        AccessPattern ap = col(c);
        ap.free[0].size = 2;
        return ap;
      };
      for (int64_t j = 1; j < blocks; ++j) {
        ctx.tensor_tensor(AluOp::add, pair(0), j == 1 ? pair(4) : pair(0), pair(4 + 2 * j));
      }
      ctx.tensor_tensor(AluOp::mul, rstd, nmean, nmean);
      ctx.tensor_tensor(AluOp::sub, rstd, msq, rstd);      // var = E[xs^2] - mean(xs)^2
      ctx.activation(ActFn::rsqrt, rstd, rstd, 1.0, eps);  // 1 / sqrt(var + eps)
      ctx.tensor_tensor(AluOp::sub, nmr, nmean, x0);       // -mean = -mean(xs) - p
      ctx.tensor_tensor(AluOp::mul, nmr, nmr, rstd);       // -mean * rstd
    } else {
      ctx.activation(ActFn::square, s, x, 1.0 / std::sqrt(double(C)), 0, &msq);
      ctx.activation(ActFn::rsqrt, rstd, msq, 1.0, eps);
    }
    const AccessPattern d = LoweringContext::sbuf_ap(*diag, gdt, rows, set_offset(t, parts), rows);
    ctx.tensor_tensor(AluOp::mul, d, LoweringContext::sbuf_ap(*ident, gdt, rows, 0, rows),
                      LoweringContext::broadcast_column(rstd, rows));
    AccessPattern nmr_row;
    if (layer) {
      const Slot tb = bank(t, blocks - 1);
      ctx.emit_transpose(LoweringContext::psum_ap(tb, 1, rows, 0), nmr);
      nmr_row = LoweringContext::sbuf_ap(*rowbuf, gdt, 1, set_offset(t, parts), rows);
      ctx.evacuate(nmr_row, LoweringContext::psum_ap(tb, 1, rows, 0));
    }
    for (int64_t j = 0; j < blocks; ++j) {
      const int64_t c0 = j * bc, nc = std::min(bc, C - c0);
      const AccessPattern dst = LoweringContext::psum_ap(bank(t, j), rows, nc);
      if (layer) {
        ctx.emit_matmul(dst, LoweringContext::sbuf_ap(*ones, gdt, 1, 0, rows),
                        ctx.operand_ap(*beta, hb, t, c0, nc, 1), true, false);
        ctx.emit_matmul(dst, nmr_row, ctx.operand_ap(gamma, hg, t, c0, nc, 1), false, false);
      }
      ctx.emit_matmul(dst, d, LoweringContext::sbuf_ap(*xg, gdt, rows, set_offset(t, C) + c0, nc),
                      !layer, true);
    }
  };
  if (sets == 2) accumulate(0);
  for (int64_t t = 0; t < out.count(); ++t) {
    if (sets == 1) {
      accumulate(t);
    } else if (t + 1 < out.count()) {
      accumulate(t + 1);
    }
    const int32_t rows = out.rows_in(t);
    for (int64_t j = 0; j < blocks; ++j) {
      const int64_t c0 = j * bc, nc = std::min(bc, C - c0);
      ctx.evacuate(ctx.tile_ap(out, t, c0, nc), LoweringContext::psum_ap(bank(t, j), rows, nc));
    }
  }
  ctx.release(*stats);
  ctx.release(*sq);
  ctx.release(*diag);
  ctx.release(*xg);
  ctx.release(*rowbuf);
  ctx.release(*pivots);
  return true;
}

LowerResult lower_norm(LoweringContext& ctx, const Node& n) {
  if (const int64_t cb = norm_chunk_cols(ctx, n)) return lower_norm_chunked(ctx, n, cb);
  const bool layer = n.op == OpKind::layernorm;
  auto in = ctx.tiles_of(n.inputs[0]);
  if (!in) return ctx.no_room();
  const int64_t C = in->cols;
  if (auto e = ctx.needs_one_chunk(C)) return e;
  const double eps = norm_eps(n);
  Bcast hg, hb = Bcast::none;
  std::optional<Tiles> gamma, beta;
  auto out = ctx.output_tiles(n, ctx.like_of(n));
  if (!out) return ctx.no_room();
  if (auto e = ctx.operand(n.inputs[1], *out, hg, gamma)) return e;
  if (layer) {
    if (auto e = ctx.operand(n.inputs[2], *out, hb, beta)) return e;
  }
  LowerResult by_array;
  if (norm_by_array(ctx, *in, *out, *gamma, hg, layer ? &*beta : nullptr, hb, eps, by_array))
    return by_array;
  auto stats = ctx.scratch(3);
  auto work = ctx.scratch(C);
  auto sq = ctx.scratch(C);
  if (!stats || !work || !sq) return ctx.no_room();
  auto bcast = [](const AccessPattern& col, int64_t c) {
    return LoweringContext::broadcast_column(col, c);
  };
  for (int64_t t = 0; t < out->count(); ++t) {
    const int32_t rows = out->rows_in(t);
    auto col = [&](int64_t c) {
      AccessPattern ap = ctx.tile_ap(*stats, 0, c, 1);
      ap.partitions = rows;
      return ap;
    };
    AccessPattern w = ctx.tile_ap(*work, 0, 0, C), s = ctx.tile_ap(*sq, 0, 0, C);
    w.partitions = s.partitions = rows;
    AccessPattern x = ctx.tile_ap(*in, t, 0, C), y = ctx.tile_ap(*out, t, 0, C);
    AccessPattern centred = x;
    if (layer) {
      // The mean on the scalar engine (its accumulate, the 1/C fused as its scale): the vector
      // engine keeps the passes that need per-row or per-column operands.
      AccessPattern mean = col(0);
      ctx.activation(ActFn::identity, s, x, 1.0 / double(C), 0, &mean);
      ctx.tensor_tensor(AluOp::sub, w, x, bcast(col(0), C));
      centred = w;
    }
    AccessPattern ss = col(1);
    ctx.activation(ActFn::square, s, centred, 1, 0, &ss);                // sum of squares
    ctx.activation(ActFn::rsqrt, col(2), col(1), 1.0 / double(C), eps);  // 1 / sqrt(var + eps)
    ctx.tensor_tensor(AluOp::mul, w, centred, bcast(col(2), C));
    if (layer) {
      ctx.tensor_tensor(AluOp::mul, w, w, ctx.operand_ap(*gamma, hg, t, 0, C, rows));
      ctx.tensor_tensor(AluOp::add, y, w, ctx.operand_ap(*beta, hb, t, 0, C, rows));
    } else {
      ctx.tensor_tensor(AluOp::mul, y, w, ctx.operand_ap(*gamma, hg, t, 0, C, rows));
    }
  }
  ctx.release(*stats);
  ctx.release(*work);
  ctx.release(*sq);
  return std::nullopt;
}

// value = index along `axis`: the free (last) axis, or the row axis of a 2-D tensor.
LowerResult lower_iota(LoweringContext& ctx, const Node& n) {
  const int64_t rank = static_cast<int64_t>(n.type.dims.size());
  const int64_t* axis = n.int_attr("axis");
  const int64_t a = axis ? (*axis < 0 ? *axis + rank : *axis) : rank - 1;
  const bool along_cols = a == rank - 1;
  if (!along_cols && a != rank - 2) {
    return ctx.error("iota along this axis is not supported by the lowering yet");
  }
  auto out = ctx.output_tiles(n, ctx.like_of(n));
  if (!out) return ctx.no_room();
  // Along the rows' own axis the value is (row mod its extent): one instruction per run of
  // partitions within one batch entry.
  const int64_t period = along_cols ? 0 : n.type.dims[static_cast<size_t>(a)].size;
  ctx.for_each_chunk(*out, [&](int64_t t, int32_t rows, int64_t c0, int64_t nc) {
    if (along_cols) {
      Instruction in = LoweringContext::vec(Opcode::iota, ctx.tile_ap(*out, t, c0, nc));
      in.value = double(c0);
      in.step = 1.0;
      ctx.emit(ctx.stream(Engine::vector), in);
      return;
    }
    const int64_t first = out->row0(t), end = first + rows;
    for (int64_t r = first; r < end;) {
      const int64_t stop = std::min(end, (r / period + 1) * period);
      AccessPattern d = ctx.tile_ap(*out, t, c0, nc);
      d.partition_start = static_cast<int32_t>(r - first);
      d.partitions = static_cast<int32_t>(stop - r);
      Instruction in = LoweringContext::vec(Opcode::iota, d);
      in.value = double(r % period);
      in.partition_step = 1.0;
      ctx.emit(ctx.stream(Engine::vector), in);
      r = stop;
    }
  });
  return std::nullopt;
}

std::optional<AluOp> comparison(const std::string& cmp) {
  static const std::map<std::string, AluOp> kOps = {{"lt", AluOp::lt}, {"le", AluOp::le},
                                                    {"eq", AluOp::eq}, {"ne", AluOp::ne},
                                                    {"gt", AluOp::gt}, {"ge", AluOp::ge}};
  auto it = kOps.find(cmp);
  if (it == kOps.end()) return std::nullopt;
  return it->second;
}

LowerResult lower_compare(LoweringContext& ctx, const Node& n) {
  const std::string* cmp = n.text_attr("cmp");
  auto alu = cmp ? comparison(*cmp) : std::nullopt;
  if (!alu) return ctx.error("unknown comparison");
  auto out = ctx.output_tiles(n, ctx.like_of(n));
  if (!out) return ctx.no_room();
  Bcast ha, hb = Bcast::none;
  std::optional<Tiles> a, b;
  if (auto e = ctx.operand(n.inputs[0], *out, ha, a)) return e;
  std::optional<int32_t> scalar;
  if (n.inputs.size() > 1) {
    if (auto e = ctx.operand(n.inputs[1], *out, hb, b)) return e;
  } else {
    const std::string* name = n.text_attr("scalar");
    scalar = name ? ctx.plan_scalar(*name) : std::nullopt;
    if (!scalar) return ctx.error("compare needs a second input or a declared run-time scalar");
  }
  ctx.for_each_chunk(*out, [&](int64_t t, int32_t rows, int64_t c0, int64_t nc) {
    const AccessPattern lhs = ctx.operand_ap(*a, ha, t, c0, nc, rows);
    if (scalar) {
      Instruction in = LoweringContext::vec(Opcode::tensor_scalar, ctx.tile_ap(*out, t, c0, nc));
      in.alu = *alu;
      in.src[0] = lhs;
      in.scalar.scalar = *scalar;
      ctx.emit(ctx.stream(Engine::vector), in);
    } else {
      ctx.tensor_tensor(*alu, ctx.tile_ap(*out, t, c0, nc), lhs,
                        ctx.operand_ap(*b, hb, t, c0, nc, rows));
    }
  });
  return std::nullopt;
}

LowerResult lower_select(LoweringContext& ctx, const Node& n) {
  auto out = ctx.output_tiles(n, ctx.like_of(n));
  if (!out) return ctx.no_room();
  Bcast how[3];
  std::optional<Tiles> ops[3];
  for (int k = 0; k < 3; ++k) {
    if (auto e = ctx.operand(n.inputs[k], *out, how[k], ops[k])) return e;
  }
  ctx.for_each_chunk(*out, [&](int64_t t, int32_t rows, int64_t c0, int64_t nc) {
    Instruction in = LoweringContext::vec(Opcode::select, ctx.tile_ap(*out, t, c0, nc));
    for (int k = 0; k < 3; ++k) in.src[k] = ctx.operand_ap(*ops[k], how[k], t, c0, nc, rows);
    ctx.emit(ctx.stream(Engine::vector), in);
  });
  return std::nullopt;
}

// Element-wise binary ops: one vector ALU instruction per tile chunk.
struct BinaryLowering {
  OpKind op;
  AluOp alu;
};
constexpr BinaryLowering kBinary[] = {
    {OpKind::add, AluOp::add},     {OpKind::bias_add, AluOp::add}, {OpKind::sub, AluOp::sub},
    {OpKind::mul, AluOp::mul},     {OpKind::div, AluOp::div},      {OpKind::maximum, AluOp::max},
    {OpKind::minimum, AluOp::min},
};

}  // namespace

// Activations (ops.def's kind): one scalar-engine instruction per tile chunk, its function the
// act column.
std::optional<ActFn> unary_act(OpKind op) {
  if (info(op).kind != OpClass::activation) return std::nullopt;
  return info(op).act;
}

void populate_elementwise_lowerings(LoweringTable& table) {
  for (const BinaryLowering& b : kBinary) {
    table.add(b.op, [alu = b.alu](LoweringContext& ctx, const Node& n) {
      return lower_binary(ctx, n, alu);
    });
  }
  for (int i = 0; i < kNumOps; ++i) {
    const OpKind op = static_cast<OpKind>(i);
    if (auto fn = unary_act(op)) {
      table.add(
          op, [fn = *fn](LoweringContext& ctx, const Node& n) { return lower_unary(ctx, n, fn); });
    }
  }
  table.add(OpKind::scale, lower_scale);
  table.add(OpKind::reduce_sum, [](LoweringContext& ctx, const Node& n) {
    return lower_reduce(ctx, n, AluOp::add, false);
  });
  table.add(OpKind::reduce_max, [](LoweringContext& ctx, const Node& n) {
    return lower_reduce(ctx, n, AluOp::max, false);
  });
  table.add(OpKind::reduce_mean, [](LoweringContext& ctx, const Node& n) {
    return lower_reduce(ctx, n, AluOp::add, true);
  });
  table.add(OpKind::softmax,
            [](LoweringContext& ctx, const Node& n) { return lower_softmax(ctx, n, false); });
  table.add(OpKind::log_softmax,
            [](LoweringContext& ctx, const Node& n) { return lower_softmax(ctx, n, true); });
  table.add(OpKind::layernorm, lower_norm);
  table.add(OpKind::rmsnorm, lower_norm);
  table.add(OpKind::iota, lower_iota);
  table.add(OpKind::compare, lower_compare);
  table.add(OpKind::select, lower_select);
}

}  // namespace wallsim::compiler_stub::lowering
