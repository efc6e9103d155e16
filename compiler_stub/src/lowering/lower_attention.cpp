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

// Run-time row `pos` of `keys` as constants of the plan, in one SBUF buffer (elements):
// `row` the one-hot row e (partition 0, keys padded to whole tiles), `col` and `zcol` e and
// 1 - e as columns ([T x tiles]: key j x T + p on partition p of column j), `z` the identity
// with row pos zeroed per key tile ([T x T] each). e comes from a [1 x 4 x Lpad] constant the
// plan writes to HBM once (a one at Lpad, then its complement), read back at Lpad - pos: the
// DMA is what takes a run-time offset.
struct PositionSelect {
  Slot slot;
  int64_t row = 0, col = 0, zcol = 0, z = 0;
};

std::optional<PositionSelect> position_select(LoweringContext& ctx, const std::string& scalar,
                                              int64_t keys, DType dt) {
  const int32_t T = ctx.tile_rows();
  const int64_t tiles = (keys + T - 1) / T, Lpad = tiles * T, eb = isa::dtype_bytes(dt);
  PositionSelect ps;
  ps.col = Lpad;
  ps.zcol = Lpad + tiles;
  ps.z = Lpad + 2 * tiles;
  const auto sc = ctx.plan_scalar(scalar);
  auto ident = ctx.identity(T, dt);
  if (!sc || !ident) return std::nullopt;
  const std::string key =
      "pos_select " + scalar + " " + std::to_string(Lpad) + " " + std::string(isa::name_of(dt));
  auto slot = ctx.plan_constant(key, SbufAllocator::aligned((ps.z + tiles * T) * eb), [&](Slot s) {
    auto idx = ctx.sbuf_alloc(SbufAllocator::aligned(2 * Lpad * 4), "pos_iota");
    auto row = ctx.sbuf_alloc(SbufAllocator::aligned(4 * Lpad * eb), "pos_onehot");
    if (!idx || !row) return false;
    for (int64_t c0 = 0; c0 < 2 * Lpad; c0 += ctx.free_chunk()) {
      const int64_t nc = std::min(ctx.free_chunk(), 2 * Lpad - c0);
      const AccessPattern i = ap(*idx, DType::fp32, 1, c0, nc);
      Instruction in = LoweringContext::vec(Opcode::iota, i);
      in.value = double(c0 - Lpad);
      in.step = 1;
      ctx.emit(ctx.stream(Engine::vector), in);
      ctx.tensor_scalar(AluOp::eq, ap(*row, dt, 1, c0, nc), i, 0.0);
      ctx.tensor_scalar(AluOp::ne, ap(*row, dt, 1, 2 * Lpad + c0, nc), i, 0.0);
    }
    const View flat{1, 4 * Lpad};
    const Slot t =
        ctx.builder().add_tensor(key, MemSpace::hbm, dt, {4 * Lpad}, isa::TensorRole::scratch);
    ctx.dma(ctx.next_store_queue(), LoweringContext::hbm_ap(t, dt, flat, 0, 1, 0, 4 * Lpad),
            ap(*row, dt, 1, 0, 4 * Lpad));
    auto at_pos = [&](int64_t from, int32_t parts, int64_t count, int64_t stride) {
      AccessPattern a = LoweringContext::hbm_ap(t, dt, flat, 0, parts, from, count);
      a.partition_stride = 1;
      a.free[0].stride = stride;
      a.scalar = *sc;
      a.scalar_stride = -1;
      return a;
    };
    ctx.dma(ctx.next_load_queue(), ap(s, dt, 1, ps.row, Lpad), at_pos(Lpad, 1, Lpad, 1));
    ctx.dma(ctx.next_load_queue(), ap(s, dt, T, ps.col, tiles), at_pos(Lpad, T, tiles, T));
    ctx.dma(ctx.next_load_queue(), ap(s, dt, T, ps.zcol, tiles), at_pos(3 * Lpad, T, tiles, T));
    for (int64_t j = 0; j < tiles; ++j) {
      ctx.tensor_tensor(AluOp::mul, ap(s, dt, T, ps.z + j * T, T), ap(*ident, dt, T, 0, T),
                        LoweringContext::broadcast_column(ap(s, dt, T, ps.zcol + j, 1), T));
    }
    ctx.release(*idx);
    ctx.release(*row);
    return true;
  });
  if (!slot) return std::nullopt;
  ps.slot = *slot;
  return ps;
}

// Decode attention: one query row (a token step over a KV cache), the heads on partitions.
// Per row tile of K, its D/T chunks go through the array as K^T [T x keys] (one copy out of
// PSUM per bank); q^T's chunks likewise, scaled on the way out and spread block-diagonally
// (Qbd[d, h] = q[d] x scale where d is head h's, 0 elsewhere: a multiply by a 0/1 head mask
// made once by memsets). Then, all heads at once:
//   S [H x keys] = sum over chunks Qbd_c^T . K^T_c (one PSUM bank per 512 keys), plus the
//   dense bias (replicated on H partitions) on the way out; softmax on H partitions;
//   P^T per key tile; O^T [T x chunks x H] = V_j^T-stationary . P^T_j, accumulated over key
//   tiles; y^T [T x chunks] = the head-mask diagonal of O^T (multiply, reduce over H); y by
//   transposes of y^T's columns.
// The chain is a few dozen instructions whatever the key count, instead of a per-head flash
// pipeline over one-row query tiles. Shapes and attributes choose it, never data.
//
// K or V a one-row append at run-time row `pos` (cache_splice): the cache's old rows, loaded
// before the write (lower_indirect.cpp) and kept on chip, with the new row spliced in by the
// array, so the attention neither waits for the write nor reloads the cache after it:
//   K^T_c = K_old_c^T . Z_j + k_new_c^T (x) e_j (a K = 1 matmul into the same PSUM), Z_j the
//   identity with row pos zeroed and e the one-hot row of pos;
//   O^T_c = sum over j of V_old_j[:, c]^T . (Z_j P^T_j) + v_new_c^T (x) p_pos, p_pos = P[:, pos]
//   as a row (e_j^T . P^T_j summed over key tiles).
// e, Z and pos's one-hot columns are plan constants (position_select).
class DecodeAttention {
 public:
  DecodeAttention(LoweringContext& ctx, const Node& n) : m_ctx(ctx), m_n(n) {}

  // One query row, no causal or segment mask, D a whole number of row tiles, heads that fit
  // the array and start on aligned partitions, keys in one vector instruction.
  static bool applies(const LoweringContext& ctx, const Node& n) {
    const TensorType& qt = ctx.type_of(n.inputs[0]);
    const TensorType& kt = ctx.type_of(n.inputs[1]);
    const int64_t T = ctx.tile_rows(), D = qt.dims.back().size;
    const int64_t* heads = n.int_attr("heads");
    const int64_t* causal = n.int_attr("causal");
    if (!heads || *heads < 1 || (causal && *causal != 0) || view_of(qt).rows != 1) return false;
    if (qt.dims.size() == 3 && qt.dims[0].size > 1) return false;
    const int64_t H = *heads, hd = D / H, Lk = view_of(kt).rows;
    const int64_t align = ctx.arch().partition_alignment;
    const int64_t bank_cols = ctx.arch().psum.bank_bytes / 4;
    if (D % T != 0 || H > T || hd % align != 0 || T % align != 0) return false;
    if ((D / T) * H > bank_cols || Lk > ctx.free_chunk() || ctx.psum_bank_count() < 4) return false;
    if (view_of(ctx.type_of(n.inputs[2])).rows != Lk) return false;
    if (n.inputs.size() > 3) {
      const int32_t m = n.inputs[3];
      const TensorType& mt = ctx.type_of(m);
      if (mt.dtype == DType::int32 || ctx.on_chip(m) || view_of(mt).rows != 1 ||
          view_of(mt).cols != Lk)
        return false;
    }
    return true;
  }

  LowerResult run() {
    const int32_t T = m_ctx.tile_rows();
    const TensorType& qt = m_ctx.type_of(m_n.inputs[0]);
    m_D = qt.dims.back().size;
    m_H = *m_n.int_attr("heads");
    m_hd = m_D / m_H;
    m_C = m_D / T;
    m_dt = m_ctx.type_of(m_n.inputs[1]).dtype;
    const int64_t Lk = view_of(m_ctx.type_of(m_n.inputs[1])).rows;
    const int64_t bank_cols = m_ctx.arch().psum.bank_bytes / 4;
    const int64_t block = std::min<int64_t>(moving_cols(m_ctx), bank_cols);
    const auto H = static_cast<int32_t>(m_H);

    // The 0/1 head mask M[d, c, h] (fp32), d = c x T + partition: 1 where d is head h's. A
    // plan constant: a decode step's layers share it (built per layer, its memsets queued on
    // the vector engine ahead of each attention's work).
    const std::string key = "decode_head_mask " + std::to_string(m_D) + " " + std::to_string(m_H) +
                            " " + std::to_string(T);
    auto mask = m_ctx.plan_constant(key, m_C * m_H * isa::dtype_bytes(DType::fp32), [&](Slot s) {
      vector_op(Opcode::memset, ap(s, DType::fp32, T, 0, m_C * m_H), 0.0);
      for (int64_t h = 0; h < m_H; ++h) {
        for (int64_t d0 = h * m_hd; d0 < (h + 1) * m_hd;) {
          const int64_t c = d0 / T, p0 = d0 % T;
          const int64_t p1 = std::min<int64_t>(T, p0 + (h + 1) * m_hd - d0);
          vector_op(Opcode::memset,
                    ap(s, DType::fp32, static_cast<int32_t>(p1 - p0), c * m_H + h, 1,
                       static_cast<int32_t>(p0)),
                    1.0);
          d0 += p1 - p0;
        }
      }
      return true;
    });
    if (!mask) return m_ctx.no_room();
    auto q = m_ctx.tiles_of(m_n.inputs[0]);
    const auto ks = cache_splice(m_ctx, m_n, 1);
    const auto vs = cache_splice(m_ctx, m_n, 2);
    auto k = m_ctx.tiles_of(ks ? ks->cache : m_n.inputs[1]);
    auto v = m_ctx.tiles_of(vs ? vs->cache : m_n.inputs[2]);
    if (!q || !k || !v) return m_ctx.no_room();
    std::optional<Tiles> k_new, v_new;
    std::optional<PositionSelect> ksel, vsel;
    if (ks) {
      k_new = m_ctx.tiles_of(ks->update);
      ksel = position_select(m_ctx, ks->scalar, Lk, m_dt);
      if (!k_new || !ksel) return m_ctx.no_room();
    }
    if (vs) {
      v_new = m_ctx.tiles_of(vs->update);
      vsel = position_select(m_ctx, vs->scalar, Lk, m_dt);
      if (!v_new || !vsel) return m_ctx.no_room();
    }
    std::optional<Tiles> bias;
    if (m_n.inputs.size() > 3) {
      bias = m_ctx.replicated(m_n.inputs[3]);
      if (!bias) return m_ctx.no_room();
    }
    auto out = m_ctx.output_tiles(m_n);
    if (!out) return m_ctx.no_room();

    // Qbd = (q^T x scale) x M, bf16: the stationary of every score matmul.
    auto qs = alloc(m_C, DType::fp32, "dec_qt");
    auto qbd = alloc(m_C * m_H, m_dt, "dec_qbd");
    if (!qs || !qbd) return m_ctx.no_room();
    {
      const Slot bank = m_ctx.next_bank();
      for (int64_t c = 0; c < m_C; ++c) {
        m_ctx.emit_transpose(LoweringContext::psum_ap(bank, T, 1, c),
                             LoweringContext::tile_ap(*q, 0, c * T, T));
      }
      m_ctx.activation(ActFn::identity, ap(*qs, DType::fp32, T, 0, m_C),
                       LoweringContext::psum_ap(bank, T, m_C), attention_scale(m_n));
      m_ctx.tensor_tensor(AluOp::mul, blocks(ap(*qbd, m_dt, T, 0, m_C * m_H), m_C, m_H, m_H),
                          blocks(ap(*qs, DType::fp32, T, 0, m_C * m_H), m_C, 1, m_H, 0),
                          blocks(ap(*mask, DType::fp32, T, 0, m_C * m_H), m_C, m_H, m_H));
    }
    // K^T [T x (chunk, key)], bf16: transposes packed into banks, one copy out per bank.
    auto kt = alloc(m_C * Lk, m_dt, "dec_kt");
    if (!kt) return m_ctx.no_room();
    {
      std::optional<Slot> bank;
      int64_t used = 0, first = 0;
      auto flush = [&] {
        if (bank && used)
          m_ctx.evacuate(ap(*kt, m_dt, T, first, used), LoweringContext::psum_ap(*bank, T, used));
        bank.reset();
        used = 0;
      };
      for (int64_t c = 0; c < m_C; ++c) {
        for (int64_t j = 0; j < k->count(); ++j) {
          const int32_t r = k->rows_in(j);
          if (used + r > bank_cols) flush();
          if (!bank) {
            bank = m_ctx.next_bank();
            first = c * Lk + k->row0(j);
          }
          const AccessPattern dst = LoweringContext::psum_ap(*bank, T, r, used);
          if (ks) {
            m_ctx.emit_matmul(dst, LoweringContext::tile_ap(*k, j, c * T, T),
                              ap(ksel->slot, m_dt, r, ksel->z + j * T, r), true, false);
            m_ctx.emit_matmul(dst, LoweringContext::tile_ap(*k_new, 0, c * T, T),
                              ap(ksel->slot, m_dt, 1, ksel->row + k->row0(j), r), false, true);
          } else {
            m_ctx.emit_transpose(dst, LoweringContext::tile_ap(*k, j, c * T, T));
          }
          used += r;
        }
      }
      flush();
    }
    // S = Qbd^T K^T (+ bias) in fp32 on H partitions, then P = softmax(S) in bf16.
    auto S = alloc(Lk, DType::fp32, "dec_s");
    auto P = alloc(Lk, m_dt, "dec_p");
    auto stats = alloc(3, DType::fp32, "dec_stats");
    if (!S || !P || !stats) return m_ctx.no_room();
    for (int64_t k0 = 0; k0 < Lk; k0 += block) {
      const int64_t nk = std::min(block, Lk - k0);
      const Slot bank = m_ctx.next_bank();
      for (int64_t c = 0; c < m_C; ++c) {
        m_ctx.emit_matmul(LoweringContext::psum_ap(bank, H, nk), ap(*qbd, m_dt, T, c * m_H, m_H),
                          ap(*kt, m_dt, T, c * Lk + k0, nk), c == 0, c + 1 == m_C);
      }
      const AccessPattern s = ap(*S, DType::fp32, H, k0, nk);
      if (bias) {
        m_ctx.tensor_tensor(AluOp::add, s, LoweringContext::psum_ap(bank, H, nk),
                            LoweringContext::sbuf_ap(bias->tiles[0], bias->dtype, H, k0, nk));
      } else {
        m_ctx.evacuate(s, LoweringContext::psum_ap(bank, H, nk));
      }
    }
    m_ctx.release(*qbd);
    m_ctx.release(*qs);
    m_ctx.release(*kt);
    const AccessPattern s_all = ap(*S, DType::fp32, H, 0, Lk);
    emit_softmax_rows(m_ctx, s_all, ap(*P, m_dt, H, 0, Lk), s_all, *stats, false);
    m_ctx.release(*S);
    m_ctx.release(*stats);
    // P^T [keys x (tile, head)], bf16.
    auto pt = alloc(k->count() * m_H, m_dt, "dec_pt");
    if (!pt) return m_ctx.no_room();
    {
      const int64_t per_bank = std::max<int64_t>(1, bank_cols / m_H);
      for (int64_t j0 = 0; j0 < k->count(); j0 += per_bank) {
        const int64_t j1 = std::min(k->count(), j0 + per_bank);
        const Slot bank = m_ctx.next_bank();
        for (int64_t j = j0; j < j1; ++j) {
          m_ctx.emit_transpose(LoweringContext::psum_ap(bank, k->rows_in(j), H, (j - j0) * m_H),
                               ap(*P, m_dt, H, k->row0(j), k->rows_in(j)));
        }
        // Tiles with the same rows leave the bank in one copy (a short last tile alone).
        for (int64_t j = j0; j < j1;) {
          int64_t e = j + 1;
          while (e < j1 && k->rows_in(e) == k->rows_in(j)) ++e;
          m_ctx.evacuate(
              ap(*pt, m_dt, k->rows_in(j), j * m_H, (e - j) * m_H),
              LoweringContext::psum_ap(bank, k->rows_in(j), (e - j) * m_H, (j - j0) * m_H));
          j = e;
        }
      }
    }
    m_ctx.release(*P);
    // A spliced V: p_pos [1 x H], then P^T's row pos zeroed.
    std::optional<Slot> ppos;
    if (vs) {
      ppos = alloc(m_H, m_dt, "dec_ppos");
      if (!ppos) return m_ctx.no_room();
      const Slot bank = m_ctx.next_bank();
      for (int64_t j = 0; j < v->count(); ++j) {
        const int32_t r = v->rows_in(j);
        m_ctx.emit_matmul(LoweringContext::psum_ap(bank, 1, H),
                          ap(vsel->slot, m_dt, r, vsel->col + j, 1), ap(*pt, m_dt, r, j * m_H, m_H),
                          j == 0, j + 1 == v->count());
      }
      m_ctx.evacuate(ap(*ppos, m_dt, 1, 0, m_H), LoweringContext::psum_ap(bank, 1, H));
      for (int64_t j = 0; j < v->count(); ++j) {
        const int32_t r = v->rows_in(j);
        const AccessPattern ptj = ap(*pt, m_dt, r, j * m_H, m_H);
        m_ctx.tensor_tensor(
            AluOp::mul, ptj, ptj,
            LoweringContext::broadcast_column(ap(vsel->slot, m_dt, r, vsel->zcol + j, 1), m_H));
      }
    }
    // O^T [T x (chunk, head)] = sum over key tiles of V_j[:, chunk]^T . P^T_j.
    const Slot ob = m_ctx.next_bank();
    for (int64_t c = 0; c < m_C; ++c) {
      const AccessPattern dst = LoweringContext::psum_ap(ob, T, H, c * m_H);
      for (int64_t j = 0; j < v->count(); ++j) {
        m_ctx.emit_matmul(dst, LoweringContext::tile_ap(*v, j, c * T, T),
                          ap(*pt, m_dt, v->rows_in(j), j * m_H, m_H), j == 0,
                          !vs && j + 1 == v->count());
      }
      if (vs) {
        m_ctx.emit_matmul(dst, LoweringContext::tile_ap(*v_new, 0, c * T, T),
                          ap(*ppos, m_dt, 1, 0, m_H), false, true);
      }
    }
    if (ppos) m_ctx.release(*ppos);
    // y^T [T x chunks] = the diagonal blocks of O^T: O^T x M, summed over the heads.
    auto w = alloc(m_C * m_H, DType::fp32, "dec_w");
    auto yt = alloc(m_C, m_dt, "dec_yt");
    if (!w || !yt) return m_ctx.no_room();
    const AccessPattern wa = ap(*w, DType::fp32, T, 0, m_C * m_H);
    m_ctx.tensor_tensor(AluOp::mul, wa, LoweringContext::psum_ap(ob, T, m_C * m_H),
                        ap(*mask, DType::fp32, T, 0, m_C * m_H));
    m_ctx.reduce(AluOp::add, ap(*yt, m_dt, T, 0, m_C), blocks(wa, m_C, m_H, m_H));
    m_ctx.release(*w);
    m_ctx.release(*pt);
    // y [1 x D]: a transpose per chunk, banks of bank_cols columns copied into the output row.
    const int64_t per_bank = std::max<int64_t>(1, bank_cols / T);
    for (int64_t c0 = 0; c0 < m_C; c0 += per_bank) {
      const int64_t c1 = std::min(m_C, c0 + per_bank);
      const Slot bank = m_ctx.next_bank();
      for (int64_t c = c0; c < c1; ++c) {
        m_ctx.emit_transpose(LoweringContext::psum_ap(bank, 1, T, (c - c0) * T),
                             ap(*yt, m_dt, T, c, 1));
      }
      m_ctx.evacuate(LoweringContext::tile_ap(*out, 0, c0 * T, (c1 - c0) * T),
                     LoweringContext::psum_ap(bank, 1, (c1 - c0) * T));
    }
    m_ctx.release(*yt);
    return std::nullopt;
  }

 private:
  std::optional<Slot> alloc(int64_t elems, DType dt, const char* hint) {
    return m_ctx.sbuf_alloc(elems * isa::dtype_bytes(dt), hint);
  }
  void vector_op(Opcode op, const AccessPattern& dst, double value) {
    Instruction in = LoweringContext::vec(op, dst);
    in.value = value;
    m_ctx.emit(m_ctx.stream(Engine::vector), in);
  }

  LoweringContext& m_ctx;
  const Node& m_n;
  int64_t m_D = 0, m_H = 1, m_hd = 0, m_C = 1;
  DType m_dt = DType::bf16;
};

}  // namespace

bool decode_row_attention_applies(const LoweringContext& ctx, const Node& n) {
  return DecodeAttention::applies(ctx, n);
}

namespace {

// The weight bytes of the matmul that makes value `id` (through one-input ops), or 0: the Q
// projection a decode step runs between its KV appends and its attention.
int64_t producer_weight_bytes(const LoweringContext& ctx, int32_t id) {
  for (const Node* n = &ctx.node(id);; n = &ctx.node(n->inputs[0])) {
    if (n->op == OpKind::matmul && n->inputs.size() >= 2) {
      const TensorType& w = ctx.type_of(n->inputs[1]);
      return w.elements() * isa::dtype_bytes(w.dtype);
    }
    if (n->inputs.size() != 1 || n->op == OpKind::input) return 0;
  }
}

}  // namespace

// The two variants' estimated cost to the step (isa::CostHints, at all the engines' DMA rate):
//  reload: both caches loaded after the writes, a chunk a row (in short pieces on the
//    dependent queues), less the Q projection's weight stream, which runs meanwhile;
//  splice: a one-row matmul per key tile and D/T chunk into K^T, p_pos's matmul and P^T's
//    row zeroed (vector) per key tile, v_new's matmul per chunk.
// On trn2 at d_model 768 (bf16) this reloads 160- and 256-row caches and splices 512 and 1024
// rows: the choices the 12-layer decode step measured best (issue 17u).
bool splice_pays(const LoweringContext& ctx, const Node& n) {
  const int64_t mode = ctx.options().decode_splice;
  if (mode != 1) return mode == 2;
  const isa::CostHints& h = ctx.arch().costs;
  const TensorType& kt = ctx.type_of(n.inputs[1]);
  const View kv = view_of(kt);
  const int64_t T = ctx.tile_rows(), eb = isa::dtype_bytes(kt.dtype);
  const int64_t tiles = (kv.rows + T - 1) / T, chunks = (kv.cols + T - 1) / T;
  const double heads = double(*n.int_attr("heads"));
  const double dma_bytes_per_ns = double(ctx.arch().dma.engines) * h.dma_gb_per_s;
  const double reload =
      h.dma_engine_bytes<double>(2.0 * double(kv.rows * kv.cols * eb), 2.0 * double(kv.rows)) /
      dma_bytes_per_ns;
  const double hidden = double(producer_weight_bytes(ctx, n.inputs[0])) / dma_bytes_per_ns;
  const double matmul_ns = double(h.moving_min_cycles) * 1e3 / h.tensor_freq_mhz;
  const double splice =
      double(tiles * chunks + tiles + chunks) * matmul_ns +
      double(tiles) * (double(h.vector_fixed_ns) + 2.0 * heads / h.vector_elements_per_ns);
  return splice < reload - hidden;
}

std::optional<CacheSplice> cache_splice(const LoweringContext& ctx, const Node& attention,
                                        size_t input) {
  if (!splice_pays(ctx, attention)) return std::nullopt;
  int32_t id = attention.inputs[input];
  // Through slices that keep every row (a decode step's K = cache[:kv_max]).
  for (const Node* n = &ctx.node(id); n->op == OpKind::slice && n->inputs.size() == 1;
       n = &ctx.node(id)) {
    const int64_t* axis = n->int_attr("axis");
    const int64_t* start = n->int_attr("start");
    const TensorType& in = ctx.type_of(n->inputs[0]);
    if (!axis || *axis != 0 || !start || *start != 0 || !(n->type == in)) {
      break;
    }
    id = n->inputs[0];
  }
  const Node& d = ctx.node(id);
  if (d.op != OpKind::dynamic_update_slice || d.inputs.size() != 2) return std::nullopt;
  const int64_t* axis = d.int_attr("axis");
  const std::string* scalar = d.text_attr("scalar");
  const Node& cache = ctx.node(d.inputs[0]);
  if ((axis && *axis != 0) || !scalar || cache.op != OpKind::input || cache.type.dims.size() != 2) {
    return std::nullopt;
  }
  const ScalarParam* p = ctx.graph().find_scalar(*scalar);
  const View uv = view_of(ctx.type_of(d.inputs[1]));
  if (!p || p->min < 0 || p->max >= cache.type.dims[0].size || uv.rows != 1 ||
      uv.cols != cache.type.dims[1].size || ctx.type_of(d.inputs[1]).dtype != cache.type.dtype) {
    return std::nullopt;
  }
  // The old rows stay on chip from the append to the attention (the Q projection between):
  // both caches within a quarter of SBUF, else the cache is reloaded after the write.
  const int64_t rows = cache.type.dims[0].size, T = ctx.tile_rows();
  const int64_t bytes = 2 * ((rows + T - 1) / T) *
                        SbufAllocator::aligned(uv.cols * isa::dtype_bytes(cache.type.dtype));
  if (bytes > ctx.sbuf_capacity() / 4) return std::nullopt;
  return CacheSplice{id, d.inputs[0], d.inputs[1], *scalar};
}

std::vector<int32_t> spliced_reads(const LoweringContext& ctx, const Node& n) {
  std::vector<int32_t> ids;
  if (n.op != OpKind::attention || !decode_row_attention_applies(ctx, n)) return ids;
  for (size_t i : {size_t{1}, size_t{2}}) {
    if (auto s = cache_splice(ctx, n, i)) ids.insert(ids.end(), {s->cache, s->update});
  }
  return ids;
}

bool spliced_by_attention(const LoweringContext& ctx, const Node& dus) {
  if (dus.op != OpKind::dynamic_update_slice) return false;
  for (const Node& a : ctx.graph().nodes) {
    if (a.op != OpKind::attention || !ctx.in_group(a.id) || a.inputs.size() < 3) continue;
    for (size_t i : {size_t{1}, size_t{2}}) {
      auto s = cache_splice(ctx, a, i);
      if (s && s->append == dus.id && decode_row_attention_applies(ctx, a)) return true;
    }
  }
  return false;
}

LowerResult lower_decode_row_attention(LoweringContext& ctx, const Node& n) {
  return DecodeAttention(ctx, n).run();
}

void populate_attention_lowerings(LoweringTable& table) {
  table.add(OpKind::decode_attention, lower_decode_attention);
}

}  // namespace wallsim::compiler_stub::lowering
