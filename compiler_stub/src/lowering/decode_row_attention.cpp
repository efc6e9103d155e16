// The one-query-row `attention` of a decode step (DecodeAttention: the heads on partitions),
// and whether it splices its KV appends on chip (cache_splice, splice_pays) rather than reload
// the caches after the writes. lower_fused_attention.cpp hands it the attentions it takes.
#include <algorithm>
#include <map>

#include "lowering/attention_aps.h"
#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub::lowering {
namespace {

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

}  // namespace wallsim::compiler_stub::lowering
