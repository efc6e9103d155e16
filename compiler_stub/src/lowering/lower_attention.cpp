// The attention family: decode_attention, one query per sequence against keys and values
// gathered by row ids from paged pools, software-pipelined across sequences.
#include <algorithm>
#include <map>

#include "lowering/attention_aps.h"
#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub::lowering {
namespace {

// decode_attention: one query row per sequence against its keys and values, gathered from the
// pools by row ids. Per sequence, in key tiles of T rows (keys on partitions), three stages:
//  1. S [H, L] on the array: the query's D/T chunks transposed through the array, scaled and
//     spread block-diagonally over the heads (Qbd[d, c, h] = q[c T + d] x scale where that is
//     head h's, 0 elsewhere: a multiply by a 0/1 head mask made once); each gathered K tile's
//     chunks transposed through the array (K^T_c [T, keys], copied out of PSUM by up to three
//     banks in rotation, one tile ahead of its matmuls), then S_j = sum over chunks
//     Qbd_c^T . K^T_c into a PSUM bank, 512 keys a bank, the bias added on the way to SBUF.
//     Key tiles are gathered in pieces on several queues, the ids read from HBM by the
//     gathers themselves. The pools stay in rows: a transposed paged pool
//     would gather block_size x 2-byte runs per head dimension, which the DMA's per-chunk cost
//     makes dearer than the array's transposes (see docs/COMPILER.md);
//  2. a softmax along each head's row of S; P's key tiles transposed back (P^T [keys, H]);
//  3. O [H, cols] accumulates P^T_j^T . V_j per column block in a bank; a 0/1 mask keeps
//     head h's columns of row h and a matmul by the column of 1 / (softmax sums) sums the H
//     rows into the output row, normalised on the way (P itself is left unnormalised),
//     which an SBUF-to-SBUF DMA moves to its partition of the output tile.
// Engines run their streams in order, so the stages are software-pipelined: stage 1 of
// sequence b is emitted after the softmax of b - 1 and before its transposes and stage 3 of
// b - 2, each sequence in flight
// on its own PSUM banks, so no engine waits on a sequence's whole chain (unless three
// sequences' state would crowd SBUF: then one at a time). Instructions grow
// with sequences x key tiles, not with heads: all heads share each one.
LowerResult lower_decode_attention(LoweringContext& ctx, const Node& n) {
  const int32_t qid = n.inputs[0], kid = n.inputs[1], vid = n.inputs[2], iid = n.inputs[3];
  const int32_t bid = n.inputs.size() > 4 ? n.inputs[4] : -1;
  const int32_t T = ctx.tile_rows();
  const TensorType& qt = ctx.type_of(qid);
  const TensorType& kt = ctx.type_of(kid);
  const int64_t B = qt.dims[0].size, D = qt.dims[1].size, N = kt.dims[0].size;
  const int64_t L = ctx.type_of(iid).dims[1].size;
  const int64_t H = *n.int_attr("heads"), hd = D / H;
  const DType qdt = qt.dtype, kvdt = kt.dtype, odt = n.type.dtype;
  const DType bdt = bid >= 0 ? ctx.type_of(bid).dtype : DType::fp32;
  const int64_t bank_cols = ctx.arch().psum.bank_bytes / 4;
  const int64_t banks = ctx.psum_bank_count();
  if (H > T) {
    return ctx.error(std::to_string(H) + " heads exceed the " + std::to_string(T) +
                     " columns of the array");
  }
  if (bank_cols < T || bank_cols < H) return ctx.error("a PSUM bank is narrower than a key tile");
  if (banks < 5) return ctx.error("needs at least 5 PSUM banks");
  if (auto e = ctx.needs_one_chunk(std::max(D, L))) return e;
  if (ctx.in_group(iid) || ctx.is_view(iid)) {
    return ctx.error("decode_attention ids computed on the chip are not supported yet");
  }
  for (int32_t id : {qid, kid, vid, bid}) {
    if (id >= 0 && !ctx.ensure_hbm(id)) return ctx.no_room();
  }
  auto out = ctx.output_tiles(n);
  if (!out) return ctx.no_room();
  Slot q_hbm = ctx.hbm_tensor(qid, isa::TensorRole::input);
  Slot k_hbm = ctx.hbm_tensor(kid, isa::TensorRole::input);
  Slot v_hbm = ctx.hbm_tensor(vid, isa::TensorRole::input);
  Slot ids_hbm = ctx.hbm_tensor(iid, isa::TensorRole::input);
  std::optional<Slot> bias_hbm;
  if (bid >= 0) bias_hbm = ctx.hbm_tensor(bid, isa::TensorRole::input);
  const View pool{N, D};
  auto alloc = [&](int64_t elems, DType dt, const char* hint) {
    return ctx.sbuf_alloc(elems * isa::dtype_bytes(dt), hint);
  };
  auto vector_op = [&](Opcode op, const AccessPattern& dst, double value, double pstep,
                       double step) {
    Instruction in = ctx.vec(op, dst);
    in.value = value;
    in.partition_step = pstep;
    in.step = step;
    ctx.emit(ctx.stream(Engine::vector), in);
  };

  // Plan constants (every layer's attention in a plan shares them): mask[h, c] = (c / hd ==
  // h), from c - hd * h in [0, hd).
  const int32_t Hp = static_cast<int32_t>(H);
  const std::string shape = std::to_string(D) + " " + std::to_string(H) + " " + std::to_string(T);
  auto in_head = [&](const AccessPattern& dst, const AccessPattern& diff) {  // 0 <= diff < hd
    ctx.tensor_scalar(AluOp::lt, dst, diff, double(hd));
    ctx.tensor_scalar(AluOp::ge, diff, diff, 0.0);
    ctx.tensor_tensor(AluOp::mul, dst, dst, diff);
  };
  auto mask =
      ctx.plan_constant("attn_head_mask " + shape, D * isa::dtype_bytes(DType::fp32), [&](Slot m) {
        auto diff = alloc(D, DType::fp32, "attn_mask");
        if (!diff) return false;
        const AccessPattern dap = ctx.sbuf_ap(*diff, DType::fp32, Hp, 0, D);
        vector_op(Opcode::iota, dap, 0, -double(hd), 1);
        in_head(ctx.sbuf_ap(m, DType::fp32, Hp, 0, D), dap);
        ctx.release(*diff);
        return true;
      });
  if (!mask) return ctx.no_room();
  // The transposed head mask maskT[d, c, h] = (c T + d in head h), from c T + d - hd h per
  // chunk: Qbd = q^T x scale x maskT.
  const int64_t C_d = (D + T - 1) / T;
  auto width_of = [&](int64_t c) { return static_cast<int32_t>(std::min<int64_t>(T, D - c * T)); };
  auto mask_t = ctx.plan_constant(
      "attn_head_mask_t " + shape, C_d * H * isa::dtype_bytes(DType::fp32), [&](Slot mt_slot) {
        auto tdiff = alloc(C_d * H, DType::fp32, "attn_mask_t");
        if (!tdiff) return false;
        if (D % T != 0) {  // a short last chunk: its partitions past the width hold no head
          vector_op(Opcode::memset, ctx.sbuf_ap(*tdiff, DType::fp32, width_of(0), 0, C_d * H), -1,
                    0, 0);
        }
        for (int64_t c = 0; c < C_d; ++c) {
          vector_op(Opcode::iota, ctx.sbuf_ap(*tdiff, DType::fp32, width_of(c), c * H, H),
                    double(c * T), 1, -double(hd));
        }
        const int32_t W = width_of(0);  // a short last chunk's extra partitions are never read
        in_head(ctx.sbuf_ap(mt_slot, DType::fp32, W, 0, C_d * H),
                ctx.sbuf_ap(*tdiff, DType::fp32, W, 0, C_d * H));
        ctx.release(*tdiff);
        return true;
      });
  if (!mask_t) return ctx.no_room();

  const int64_t tiles = (L + T - 1) / T;
  const int32_t TP = static_cast<int32_t>(std::min<int64_t>(T, L));
  auto rows_of = [&](int64_t j) { return static_cast<int32_t>(std::min<int64_t>(T, L - j * T)); };
  const double scale = attention_scale(n);
  // PSUM: three banks rotate through stages 1-2 (one per sequence in flight); one to three
  // take the K tiles' transposes in turn; the rest hold output column blocks for stage 3, in sets
  // that alternate between sequences.
  const int64_t C = moving_cols(ctx);
  const int64_t kt_banks = std::clamp<int64_t>(banks - 5, 1, 3), first_set = 3 + kt_banks;
  const int64_t at_once = std::max<int64_t>(1, std::min((D + C - 1) / C, (banks - first_set) / 2));
  const int64_t sets = (banks - first_set) / at_once;
  int64_t kt_turn = 0;

  struct Seq {  // one sequence's on-chip state between stages
    std::vector<Slot> held;
    Slot v, s, pt, stats;
  };
  std::map<int64_t, Seq> live;
  auto take = [&](Seq& q, int64_t elems, DType dt, const char* hint) -> std::optional<Slot> {
    auto s = alloc(elems, dt, hint);
    if (s) q.held.push_back(*s);
    return s;
  };
  // Key tile j's ids, read by the gather from HBM: one id per destination partition.
  auto ids_col = [&](int64_t b, int64_t j, int32_t p0, int32_t parts) {
    AccessPattern a = ctx.hbm_ap(ids_hbm, DType::int32, View{B, L}, b, parts, j * T + p0, 1);
    a.partition_stride = 1;
    return a;
  };
  // A key tile's rows gathered in pieces of at least kGatherRows rows on queues of their own,
  // so a tile arrives in a fraction of one engine's time.
  constexpr int64_t kGatherRows = 32, kGatherPieces = 4;
  auto gather = [&](const AccessPattern& dst, int64_t b, int64_t j, Slot table, int64_t c0,
                    int64_t nc) {
    const int32_t rows = rows_of(j);
    const int64_t pieces =
        std::clamp<int64_t>((rows + kGatherRows - 1) / kGatherRows, 1, kGatherPieces);
    for (int64_t i = 0; i < pieces; ++i) {
      const auto p0 = static_cast<int32_t>(rows * i / pieces);
      const auto p1 = static_cast<int32_t>(rows * (i + 1) / pieces);
      Instruction g;
      g.op = Opcode::dma_gather;
      g.dst = dst;
      g.dst.partition_start += p0;
      g.dst.partitions = p1 - p0;
      g.src[0] = ctx.hbm_ap(table, kvdt, pool, 0, static_cast<int32_t>(N), c0, nc);
      g.src[1] = ids_col(b, j, p0, p1 - p0);
      ctx.emit(ctx.next_load_queue(), g);
    }
    ctx.count_bytes_in(rows * (4 + nc * isa::dtype_bytes(kvdt)));
  };
  // K tiles and their transposes in rings (per op), so a tile's gather starts while the tiles
  // before it are still in use: four and three where they take at most an eighth of SBUF, else
  // two of each.
  const bool deep = 4 * SbufAllocator::aligned(D * isa::dtype_bytes(kvdt)) +
                        3 * SbufAllocator::aligned(C_d * T * isa::dtype_bytes(kvdt)) <=
                    ctx.sbuf_capacity() / 8;
  const int64_t kKRing = deep ? 4 : 2, kKtRing = deep ? 3 : 2;
  std::vector<Slot> k_ring, kt_ring;
  for (int64_t i = 0; i < kKRing + kKtRing; ++i) {
    auto s = i < kKRing ? alloc(D, kvdt, "k") : alloc(C_d * T, kvdt, "k_t");
    if (!s) return ctx.no_room();
    (i < kKRing ? k_ring : kt_ring).push_back(*s);
  }
  int64_t k_turn = 0;

  // Stage 1: loads, scores into S (+ bias), V gathered for stage 3.
  auto stage1 = [&](int64_t b) -> LowerResult {
    Seq& q = live[b];
    auto qb = alloc(D, qdt, "q");
    auto qs = alloc(C_d, DType::fp32, "q_t");
    auto qbd = take(q, C_d * H, kvdt, "q_bd");
    auto s = take(q, L, DType::fp32, "scores");
    auto pt = take(q, tiles * H, kvdt, "p_t");
    auto stats = take(q, 3, DType::fp32, "stats");
    auto v = take(q, tiles * D, kvdt, "v");
    std::optional<Slot> bias;
    if (bid >= 0) bias = take(q, L, bdt, "bias");
    if (!qb || !qs || !qbd || !s || !pt || !stats || !v || (bid >= 0 && !bias)) {
      return ctx.no_room();
    }
    q.v = *v;
    q.s = *s;
    q.pt = *pt;
    q.stats = *stats;
    const Slot bank = ctx.psum_bank(static_cast<size_t>(b % 3));
    // Qbd: the query row's chunks transposed into the sequence's bank, scaled on the way out,
    // then spread over the heads by the mask.
    ctx.dma(ctx.next_load_queue(), ctx.sbuf_ap(*qb, qdt, 1, 0, D),
            ctx.hbm_ap(q_hbm, qdt, View{B, D}, b, 1, 0, D));
    for (int64_t c = 0; c < C_d; ++c) {
      ctx.emit_transpose(ctx.psum_ap(bank, width_of(c), 1, c),
                         ctx.sbuf_ap(*qb, qdt, 1, c * T, width_of(c)));
    }
    const int32_t W = width_of(0);
    ctx.activation(ActFn::identity, ctx.sbuf_ap(*qs, DType::fp32, W, 0, C_d),
                   ctx.psum_ap(bank, W, C_d), scale);
    ctx.tensor_tensor(AluOp::mul, blocks(ctx.sbuf_ap(*qbd, kvdt, W, 0, C_d * H), C_d, H, H),
                      blocks(ctx.sbuf_ap(*qs, DType::fp32, W, 0, C_d * H), C_d, 1, H, 0),
                      blocks(ctx.sbuf_ap(*mask_t, DType::fp32, W, 0, C_d * H), C_d, H, H));
    ctx.release(*qb);
    ctx.release(*qs);
    if (bias) {
      ctx.dma(ctx.next_load_queue(), ctx.sbuf_ap(*bias, bdt, Hp, 0, L),
              ctx.hbm_ap(*bias_hbm, bdt, View{B * H, L}, b * H, Hp, 0, L));
    }
    // K^T of tile j: gathered, each chunk transposed, as many to a bank as fit, a copy out per
    // bank (a short last chunk, on fewer partitions, on its own). Made one tile ahead of the
    // tile's score matmuls, so the array transposes tile j + 1 while tile j's copy runs.
    std::vector<Slot> kts(static_cast<size_t>(tiles));
    auto prepare = [&](int64_t j) {
      const int32_t rows = rows_of(j);
      const Slot k = k_ring[static_cast<size_t>(k_turn % kKRing)];
      const Slot kt = kt_ring[static_cast<size_t>(k_turn++ % kKtRing)];
      kts[static_cast<size_t>(j)] = kt;
      gather(ctx.sbuf_ap(k, kvdt, rows, 0, D), b, j, k_hbm, 0, D);
      const int64_t fit = bank_cols / rows;
      for (int64_t c0 = 0; c0 < C_d;) {
        const int32_t w = width_of(c0);
        int64_t c1 = c0 + 1;
        while (c1 < C_d && c1 - c0 < fit && width_of(c1) == w) ++c1;
        const Slot kb = ctx.psum_bank(static_cast<size_t>(3 + kt_turn++ % kt_banks));
        for (int64_t c = c0; c < c1; ++c) {
          ctx.emit_transpose(ctx.psum_ap(kb, w, rows, (c - c0) * rows),
                             ctx.sbuf_ap(k, kvdt, rows, c * T, w));
        }
        ctx.evacuate(ctx.sbuf_ap(kt, kvdt, w, c0 * rows, (c1 - c0) * rows),
                     ctx.psum_ap(kb, w, (c1 - c0) * rows));
        c0 = c1;
      }
    };
    // S_j = sum over chunks Qbd_c^T . K^T_c, per_bank tiles to a bank, each bank copied out
    // (+ bias) when its last tile is in.
    const int64_t per_bank = bank_cols / T;
    prepare(0);
    for (int64_t j = 0; j < tiles; ++j) {
      if (j + 1 < tiles) prepare(j + 1);
      const int32_t rows = rows_of(j);
      const int64_t g0 = j / per_bank * per_bank;
      const Slot kt = kts[static_cast<size_t>(j)];
      for (int64_t c = 0; c < C_d; ++c) {
        ctx.emit_matmul(ctx.psum_ap(bank, Hp, rows, (j - g0) * T),
                        ctx.sbuf_ap(*qbd, kvdt, width_of(c), c * H, H),
                        ctx.sbuf_ap(kt, kvdt, width_of(c), c * rows, rows), c == 0, c + 1 == C_d);
      }
      if (j + 1 < tiles && (j + 1) % per_bank != 0) continue;
      const int64_t c0 = g0 * T, nc = std::min(L, (j + 1) * T) - c0;
      const AccessPattern sdst = ctx.sbuf_ap(*s, DType::fp32, Hp, c0, nc);
      if (bias) {
        ctx.tensor_tensor(AluOp::add, sdst, ctx.psum_ap(bank, Hp, nc),
                          ctx.sbuf_ap(*bias, bdt, Hp, c0, nc));
      } else {
        ctx.evacuate(sdst, ctx.psum_ap(bank, Hp, nc));
      }
    }
    for (int64_t j = 0; j < tiles; ++j) {  // V, for stage 3, while the scores are computed
      gather(ctx.sbuf_ap(*v, kvdt, rows_of(j), j * D, D), b, j, v_hbm, 0, D);
    }
    return std::nullopt;
  };

  // Stage 2: softmax (2a), then P^T per key tile, a bank of them at a time (2b).
  auto stage2a = [&](int64_t b) {
    const Seq& q = live.at(b);
    const AccessPattern sall = ctx.sbuf_ap(q.s, DType::fp32, Hp, 0, L);
    auto col = [&](int64_t c) { return ctx.sbuf_ap(q.stats, DType::fp32, Hp, c, 1); };
    ctx.reduce(AluOp::max, col(0), sall);
    ctx.tensor_tensor(AluOp::sub, sall, sall, LoweringContext::broadcast_column(col(0), L));
    AccessPattern sum = col(1);
    ctx.activation(ActFn::exp, sall, sall, 1, 0, &sum);
    ctx.tensor_scalar(AluOp::div, col(2), col(1), 1.0, /*reverse=*/true);  // stage 3's scale
  };
  auto stage2b = [&](int64_t b) {
    const Seq& q = live.at(b);
    const Slot bank = ctx.psum_bank(static_cast<size_t>(b % 3));
    const int64_t per_bank = bank_cols / H;
    for (int64_t g0 = 0; g0 < tiles; g0 += per_bank) {
      const int64_t g1 = std::min(tiles, g0 + per_bank);
      for (int64_t j = g0; j < g1; ++j) {
        ctx.emit_transpose(ctx.psum_ap(bank, rows_of(j), Hp, (j - g0) * H),
                           ctx.sbuf_ap(q.s, DType::fp32, Hp, j * T, rows_of(j)));
      }
      // Whole tiles in one copy; a short last tile on its own partitions.
      const int64_t short_tile = rows_of(g1 - 1) < TP ? g1 - 1 : g1;
      if (short_tile > g0) {
        ctx.evacuate(ctx.sbuf_ap(q.pt, kvdt, TP, g0 * H, (short_tile - g0) * H),
                     ctx.psum_ap(bank, TP, (short_tile - g0) * H));
      }
      if (short_tile < g1) {
        ctx.evacuate(ctx.sbuf_ap(q.pt, kvdt, rows_of(short_tile), short_tile * H, H),
                     ctx.psum_ap(bank, rows_of(short_tile), H, (short_tile - g0) * H));
      }
    }
  };

  // Stage 3: O = P V per column block; the heads' own columns summed into the output row.
  auto stage3 = [&](int64_t b) -> LowerResult {
    Seq& q = live.at(b);
    auto row = take(q, D, odt, "row");
    if (!row) return ctx.no_room();
    const Slot sum_bank = ctx.psum_bank(static_cast<size_t>(b % 3));
    const size_t set = static_cast<size_t>(first_set + (b % sets) * at_once);
    for (int64_t c0 = 0; c0 < D; c0 += C * at_once) {
      const int64_t width = std::min(C * at_once, D - c0);
      for (int64_t j = 0; j < tiles; ++j) {
        for (int64_t off = 0; off < width; off += C) {
          const int64_t nc = std::min(C, width - off);
          ctx.emit_matmul(ctx.psum_ap(ctx.psum_bank(set + static_cast<size_t>(off / C)), Hp, nc),
                          ctx.sbuf_ap(q.pt, kvdt, rows_of(j), j * H, H),
                          ctx.sbuf_ap(q.v, kvdt, rows_of(j), j * D + c0 + off, nc), j == 0,
                          j + 1 == tiles);
        }
      }
      for (int64_t off = 0; off < width; off += C) {
        const int64_t nc = std::min(C, width - off);
        auto masked = alloc(nc, DType::fp32, "masked");
        if (!masked) return ctx.no_room();
        ctx.tensor_tensor(AluOp::mul, ctx.sbuf_ap(*masked, DType::fp32, Hp, 0, nc),
                          ctx.psum_ap(ctx.psum_bank(set + static_cast<size_t>(off / C)), Hp, nc),
                          ctx.sbuf_ap(*mask, DType::fp32, Hp, c0 + off, nc));
        ctx.emit_matmul(ctx.psum_ap(sum_bank, 1, nc), ctx.sbuf_ap(q.stats, DType::fp32, Hp, 2, 1),
                        ctx.sbuf_ap(*masked, DType::fp32, Hp, 0, nc), true, true);
        ctx.evacuate(ctx.sbuf_ap(*row, odt, 1, c0 + off, nc), ctx.psum_ap(sum_bank, 1, nc));
        ctx.release(*masked);
      }
    }
    // The row to its place: partition b - row0 of b's output tile.
    int64_t t = 0;
    while (out->row0(t) + out->rows_in(t) <= b) ++t;
    AccessPattern dst = ctx.tile_ap(*out, t, 0, D);
    dst.partition_start = static_cast<int32_t>(b - out->row0(t));
    dst.partitions = 1;
    ctx.dma(ctx.next_store_queue(), dst, ctx.sbuf_ap(*row, odt, 1, 0, D));
    for (Slot s : q.held) ctx.release(s);
    live.erase(b);
    return std::nullopt;
  };

  // Three sequences in flight when their state takes at most half of SBUF, else one.
  const int64_t kvb = isa::dtype_bytes(kvdt);
  const int64_t state = C_d * H * kvb + D * isa::dtype_bytes(odt) + tiles * (H * kvb + D * kvb) +
                        L * (4 + (bid >= 0 ? isa::dtype_bytes(bdt) : 0)) + 3 * 4;
  const int64_t lag =
      3 * state + D * isa::dtype_bytes(qdt) + C_d * 4 + (kKRing * D + kKtRing * C_d * T) * kvb <=
              ctx.sbuf_share(ctx.options().attention_pipeline_percent)
          ? 1
          : 0;
  // Per step: the softmax of sequence i - lag first, so the lane engines run it while the
  // array works on sequence i's scores (the streams are in order), then i's stage 1, then the
  // softmax's transposes and sequence i - 2 lag's stage 3.
  for (int64_t i = 0; i < B + 2 * lag; ++i) {
    const bool two = i - lag >= 0 && i - lag < B;
    if (two && lag) stage2a(i - lag);
    if (i < B) {
      if (auto e = stage1(i)) return e;
    }
    if (two && !lag) stage2a(i - lag);
    if (two) stage2b(i - lag);
    if (i - 2 * lag >= 0 && i - 2 * lag < B) {
      if (auto e = stage3(i - 2 * lag)) return e;
    }
  }
  for (Slot s : k_ring) ctx.release(s);
  for (Slot s : kt_ring) ctx.release(s);
  return std::nullopt;
}

}  // namespace

void populate_attention_lowerings(LoweringTable& table) {
  table.add(OpKind::decode_attention, lower_decode_attention);
}

}  // namespace wallsim::compiler_stub::lowering
