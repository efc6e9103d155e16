// The K-blocked slabs of a narrow matmul (matmul_blocking.h, slab_cols()): B streams by slabs
// of one K chunk through a ring while the turn's row tiles accumulate in PSUM.
#include "lowering/matmul_blocking.h"
#include "lowering/matmul_parts.h"

namespace wallsim::compiler_stub::lowering {

// Output row tiles `ts` of a narrow matmul with K-blocked B (slab_cols()), from their A^T
// stationaries `at`: row tiles in turns that share each slab, as many as leave every block of
// a group its slot of a PSUM bank (a block of `slab_block` columns; narrower blocks share a
// bank side by side); per turn and group of column blocks, B's K chunks load as slabs, each
// `slab_ring` - 1 ahead of its matmuls (across groups and turns too); after a group's last K
// chunk each block is evacuated and stored.
LowerResult k_blocked(LoweringContext& ctx, const Tiles& a, const std::vector<int64_t>& ts,
                      const std::vector<std::vector<AtChunk>>& at, const Moving& b,
                      const std::vector<int64_t>& kc, const Tiles& out, const Narrow& narrow) {
  const int64_t N = b.tiles.cols, bank_cols = moving_cols(ctx);
  const int64_t width = std::min({b.slab_block > 0 ? b.slab_block : bank_cols, bank_cols, N});
  const int64_t per_bank = slab_per_bank(bank_cols, width, N);
  const DType dt = b.tiles.dtype, odt = out.dtype;
  const View bv{b.tiles.rows, N};
  const int64_t banks = slab_slots(ctx.psum_bank_count(), bank_cols, width, N);
  const auto per_turn =
      static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(ts.size()), banks));
  struct Item {
    size_t i0, i1;   // row tiles ts[i0, i1)
    int64_t g0, gs;  // columns [g0, g0 + gs)
    size_t k;
  };
  std::vector<Item> items;
  for (size_t i0 = 0; i0 < ts.size(); i0 += per_turn) {
    const size_t i1 = std::min(ts.size(), i0 + per_turn);
    const int64_t blocks = std::max<int64_t>(1, banks / static_cast<int64_t>(i1 - i0));
    const int64_t group = std::min(b.slab_cols, blocks * width);
    for (int64_t g0 = 0; g0 < N; g0 += group)
      for (size_t k = 0; k < kc.size(); ++k)
        items.push_back({i0, i1, g0, std::min(group, N - g0), k});
  }
  std::vector<Slot> ring;  // slabs of items [next - ring.size(), next)
  size_t next = 0;
  auto load = [&]() -> bool {
    const Item& it = items[next++];
    const int32_t ks = b.tiles.rows_in(kc[it.k]);
    auto s = ctx.sbuf_alloc(it.gs * isa::dtype_bytes(dt), "slab");
    if (!s) return false;
    ctx.copy_rows(true, LoweringContext::sbuf_ap(*s, dt, ks, 0, it.gs),
                  ctx.hbm_ap(b.hbm, dt, bv, b.tiles.row0(kc[it.k]), ks, it.g0, it.gs));
    ctx.count_bytes_in(ks * it.gs * isa::dtype_bytes(dt));
    ring.push_back(*s);
    return true;
  };
  const auto depth = static_cast<size_t>(b.slab_ring > 0 ? b.slab_ring : kSlabs);
  while (next < items.size() && next + 1 < depth)
    if (!load()) return ctx.no_room();
  std::vector<Slot> bank;  // per (row tile, block) of the current group
  OutRing outs(ctx, ts.size());
  for (size_t j = 0; j < items.size(); ++j) {
    if (ctx.too_large()) return ctx.too_large_error();
    if (next < items.size() && !load()) return ctx.no_room();
    const Item& it = items[j];
    const int32_t ks = b.tiles.rows_in(kc[it.k]);
    const int64_t blocks = (it.gs + width - 1) / width;
    if (it.k == 0) {  // a slot per (row tile, block): `per_bank` side by side in each bank
      bank.clear();
      for (int64_t q = 0; q < blocks * static_cast<int64_t>(it.i1 - it.i0); ++q)
        bank.push_back(q % per_bank ? bank.back() : ctx.next_bank());
    }
    auto slot = [&](size_t i, int64_t q, int32_t rows, int64_t ns) {
      const int64_t s = static_cast<int64_t>(i - it.i0) * blocks + q;
      return ctx.psum_ap(bank[static_cast<size_t>(s)], rows, ns, s % per_bank * width);
    };
    const Slot slab = ring.front();
    for (size_t i = it.i0; i < it.i1; ++i) {
      const int32_t rows = a.rows_in(ts[i]);
      for (int64_t q = 0; q < blocks; ++q) {
        const int64_t ns = std::min(width, it.gs - q * width);
        ctx.emit_matmul(slot(i, q, rows, ns), stationary_ap(at[i][it.k], dt, ks, rows),
                        LoweringContext::sbuf_ap(slab, dt, ks, q * width, ns), it.k == 0,
                        it.k + 1 == kc.size());
      }
    }
    ctx.release(slab);
    ring.erase(ring.begin());
    if (it.k + 1 < kc.size()) continue;
    for (size_t i = it.i0; i < it.i1; ++i) {
      const int64_t t = ts[i];
      const int32_t rows = a.rows_in(t);
      for (int64_t q = 0; q < blocks; ++q) {
        const int64_t n0 = it.g0 + q * width, ns = std::min(width, it.gs - q * width);
        auto block = ctx.sbuf_alloc(ns * isa::dtype_bytes(odt), "out");
        if (!block) return ctx.no_room();
        const AccessPattern o = LoweringContext::sbuf_ap(*block, odt, rows, 0, ns);
        ctx.evacuate(o, slot(i, q, rows, ns));
        ctx.copy_rows(false, ctx.hbm_ap(narrow.out, odt, narrow.out_view, a.row0(t), rows, n0, ns),
                      o);
        ctx.count_bytes_out(rows * ns * isa::dtype_bytes(odt));
        outs.stored(*block);
      }
    }
  }
  return std::nullopt;
}

}  // namespace wallsim::compiler_stub::lowering
