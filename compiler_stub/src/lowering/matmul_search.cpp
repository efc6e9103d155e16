// The matmul schedule search (issue 35): as a matmul whose B is in HBM starts (B streamed by
// its rules, or a B that fits SBUF, read by this matmul alone, whose rules load it whole), the
// points of its schedule space (matmul_schedule.h) that fit SBUF are enumerated, each priced by
// the cost model, and the cheapest (or compiler.matmul_schedule's pick) is what the op's
// blocking queries and row windows then follow.
#include <algorithm>

#include "lowering/lowering_context.h"

namespace wallsim::compiler_stub::lowering {

// Row tiles one window of `n` holds under the current schedule, and the op's row tiles: all of
// them when it runs in no windows and fits; 0 fit when one row tile does not.
std::pair<int64_t, int64_t> LoweringContext::window_fit(const Node& n) const {
  const int64_t tiles = tile_count(n);
  const auto [per_tile, fixed] = footprint(n);
  if (!row_windowed(n))
    return {per_tile * tiles + fixed <= m_sbuf.capacity() - pinned_bytes(n) ? tiles : 0, tiles};
  const int64_t budget =
      (m_sbuf.capacity() - pinned_bytes(n) - fixed) * m_options.row_window_fill_percent / 100;
  return {std::min(tiles, std::max<int64_t>(0, budget / std::max<int64_t>(1, per_tile))), tiles};
}

size_t LoweringContext::model_pick(const MatmulFacts& f,
                                   const std::vector<MatmulSchedule>& points) const {
  // Points within kTie of the fastest are taken as tied (the model's figures are no finer):
  // of those, the one with the fewest array instructions (the widest moving tiles).
  std::vector<MatmulCost> costs;
  double best = 0;
  for (const MatmulSchedule& p : points) {
    costs.push_back(predict_matmul(f, p, m_arch));
    best = costs.size() == 1 ? costs[0].total_ns() : std::min(best, costs.back().total_ns());
  }
  constexpr double kTie = 1.01;
  size_t pick = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const bool tied = costs[i].total_ns() <= best * kTie;
    if (tied && (costs[pick].total_ns() > best * kTie || costs[i].matmuls < costs[pick].matmuls))
      pick = i;
  }
  // The rules' point stays unless the model's pick beats it by more than the model's error
  // between neighbouring points (MatmulScheduleOnChip: a few points mispriced by 10-25 %, the
  // K-blocked ring's refills and the transposed B's chains under-priced).
  constexpr double kLeaveRules = 1.10;
  if (costs[0].total_ns() <= costs[pick].total_ns() * kLeaveRules) pick = 0;
  return pick;
}

void LoweringContext::choose_matmul_schedule(const Node& n) {
  m_schedule.reset();
  const int64_t mode = m_options.matmul_schedule;
  // A convolution's window route (window_matmul.cpp) against the rules' point.
  double window_ns = 0;
  if (auto w = window_schedule(*this, n, mode, &window_ns)) {
    m_schedule = {n.id, *w};
    ++m_search.searched;
    m_search.candidates = 2;
    m_search.predicted_ns += window_ns;
    return;
  }
  if (mode == -2 || n.op != OpKind::matmul || n.inputs.size() > 3) return;
  const int32_t aid = n.inputs[0], bid = n.inputs[1];
  // A B that fits SBUF: a plain tensor in HBM that only this matmul reads (whole, it would stay
  // on chip for the others) and not loaded K-interleaved; its rules' point loads it whole.
  // And A in HBM too: the model prices the op alone, its first loads after the launch; where A
  // was made on chip by an earlier op of the group, B's load runs beside that op's work
  // (transformer_block on trn2 was 6.7 % slower with such matmuls searched).
  const bool streamed = streams_b(*this, n);
  if (!streamed && (on_chip(bid) || is_view(bid) || use_count(bid) != 1 || on_chip(aid) ||
                    k_interleave(*this, n)))
    return;
  const TensorType &at = type_of(aid), &bt = type_of(bid);
  const View av = view_of(at), bv = view_of(bt);
  MatmulFacts f;
  f.M = av.rows;
  f.K = av.cols;
  f.N = bv.cols;
  f.a_bytes = isa::dtype_bytes(at.dtype);
  f.b_bytes = isa::dtype_bytes(bt.dtype);
  f.out_bytes = isa::dtype_bytes(n.type.dtype);
  f.fp32 = at.dtype == DType::fp32 || bt.dtype == DType::fp32;
  f.a_loaded = !on_chip(aid);
  auto transposed = [&](int32_t id) {
    if (!is_view(id)) return false;
    const auto& g = view_of_value(id).groups;
    return g[0].size() == 1 && g[0][0].stride == 1 && g[1].size() == 1 &&
           g[1][0].stride >= g[0][0].size;
  };
  f.b_transposed = transposed(bid);
  f.a_transposed = f.a_loaded && transposed(aid);
  f.tile_rows = tile_rows();
  f.k_rows = m_arch.tensor.rows;
  f.moving_cols = moving_cols(*this);
  f.psum_banks = psum_bank_count();
  f.dma_engines = m_arch.dma.engines;
  f.dma_split_bytes = std::max<int64_t>(1, m_options.dma_split_bytes);
  f.dma_min_chunk_bytes = std::max<int64_t>(1, m_options.dma_min_chunk_bytes);
  f.load_queues = std::max<int64_t>(1, queues().load_queue_count());

  // Today's rules first: one point of the space.
  std::vector<MatmulSchedule> points;
  MatmulSchedule today;
  today.narrow = narrow_matmul(*this, n);
  today.k_blocked = slab_cols(*this, n) > 0;
  today.b_whole = !streamed;
  // K-blocked, the rules' blocks are a bank wide (panel_cols is then the full-K panel's width,
  // which K-blocking replaces).
  today.panel_cols =
      streamed && !today.k_blocked ? panel_cols(*this, n) : std::min(f.moving_cols, f.N);
  today.buffers = today.k_blocked ? kSlabs : 2;
  today.a_route = stationary_route(*this, n);
  today.window_tiles = std::max<int64_t>(1, window_fit(n).first);
  points.push_back(today);

  std::vector<TransposeRoute> routes{TransposeRoute::array};
  // A B that fits streams with A's row tiles loaded fine in the order read and A^T made by the
  // array: a DMA route's transposing loads (one descriptor per stationary, on the side queues)
  // are not ordered so, and the model under-prices how they pace the multiplies (trn2 1024^3:
  // 35.0 us predicted, 50.6 us simulated, against the array's 36.0 and 41.2), so only the
  // rules' point (B whole) keeps one.
  if (f.a_loaded && !is_view(aid) && at.dtype == bt.dtype && streamed) {
    // A DMA route loads by the hardware transpose where the chip has one (load_transposed).
    const bool hw = m_arch.dma.hardware_transpose && f.a_bytes == 2 &&
                    m_arch.costs.dma_transpose_chunk_bytes > 0;
    routes.push_back(hw ? TransposeRoute::dma_transpose : TransposeRoute::strided_dma);
  }
  // A transposed view: A^T is its base, whose rows load as they are.
  if (f.a_transposed && at.dtype == bt.dtype) routes.push_back(TransposeRoute::base);
  const bool slabs = n.inputs.size() == 2 && !n.int_attr(kEpilogueAct) && !is_view(bid);
  std::vector<int64_t> widths;
  for (int64_t w = std::min(f.moving_cols, f.N); w >= 1 && widths.size() < 4; w /= 2)
    widths.push_back(w);
  const int64_t limit = m_options.max_plan_instructions / 2;
  // K-blocked, the slabs in the ring: kSlabs, or one more than the DMA engines (a slab of a
  // narrow block's columns is one piece on one engine: 128 x 128 bf16 is 32 KiB).
  const int64_t deep_ring = std::max<int64_t>(kSlabs, f.dma_engines + 1);
  for (const bool narrow : {false, true})
    for (const bool kb : {false, true})
      for (const TransposeRoute route : routes)
        for (const int64_t width : widths)
          for (const bool all_panels : {false, true}) {
            // Panels in flight: two (double buffering) or every panel (B loaded whole, in the
            // order the multiplies read it, where SBUF holds it). A transposed B's panels load
            // one ahead, after each block's multiplies (lower_matmul.cpp): two only. K-blocked,
            // `all_panels` is the deep ring; its blocks are `width` wide, several to a bank.
            const int64_t panels = (f.N + width - 1) / width;
            // Narrower K-blocked blocks take the deep ring only: with kSlabs the model prices a
            // slab's one descriptor on one engine, 3 in flight (trn1 1024 x 4096 x 4096 at
            // n = 256: 1902 us predicted, 533 simulated, as fast as the deep ring's 532: the
            // slabs' SBUF is not reused so soon, so more load ahead than the ring's lookahead).
            if ((kb && (!narrow || !slabs || (width != widths.front() && !all_panels))) ||
                (narrow && route != TransposeRoute::array) ||
                (!kb && all_panels && (panels <= 2 || f.b_transposed)))
              continue;
            MatmulSchedule s;
            s.narrow = narrow;
            s.k_blocked = kb;
            s.panel_cols = width;
            s.buffers = kb ? (all_panels ? deep_ring : kSlabs) : all_panels ? panels : 2;
            s.a_route = route;
            s.fine_loads = !streamed;
            m_schedule = {n.id, s};
            if (kb && slab_cols(*this, n) == 0) continue;
            if (narrow && row_tile_bytes(*this, n, true) > m_sbuf.capacity()) continue;
            s.window_tiles = 0;  // as many as fit
            m_schedule = {n.id, s};
            int64_t fit = window_fit(n).first;
            // K-blocked, a smaller ring for more row tiles a turn (slab_cols): the most that
            // fit beside the ring their turns need.
            for (int64_t wt = window_fit(n).second; kb && wt > fit;) {
              s.window_tiles = wt;
              m_schedule = {n.id, s};
              const int64_t got = window_fit(n).first;
              if (got >= wt) fit = wt;
              wt = std::min(wt - 1, got);
            }
            for (int64_t wt = fit; wt >= 1; wt /= 2) {
              s.window_tiles = wt;
              // Narrower blocks and a deep ring let a turn's row tiles share each slab: with
              // one row tile they share nothing (and the model under-prices a narrow A read by
              // K chunks there: trn2 20 x 2779 x 384, 14.5 us predicted, 31.8 simulated).
              if (kb && wt < 2 && (width != widths.front() || s.buffers != kSlabs)) break;
              if (predict_matmul(f, s, m_arch).matmuls > limit) break;
              const bool dup =
                  std::any_of(points.begin(), points.end(), [&](const MatmulSchedule& p) {
                    return p.narrow == s.narrow && p.k_blocked == s.k_blocked &&
                           p.b_whole == s.b_whole && p.buffers == s.buffers &&
                           p.fine_loads == s.fine_loads && p.panel_cols == s.panel_cols &&
                           p.window_tiles == s.window_tiles && p.a_route == s.a_route;
                  });
              if (!dup) points.push_back(s);
            }
          }
  if (points.size() == 1) {  // nothing to choose: the rules (and their errors) as they are
    m_schedule.reset();
    return;
  }
  size_t pick = 0;
  if (mode >= 0) {
    pick = std::min(points.size() - 1, static_cast<size_t>(mode));
  } else {
    std::vector<double> costs;
    for (const MatmulSchedule& p : points) costs.push_back(predict_matmul(f, p, m_arch).total_ns());
    pick = model_pick(f, points);
    if (!m_options.forced_point.empty()) {
      const size_t forced = find_point(points, m_options.forced_point);
      if (forced < points.size())
        pick = forced;
      else
        ++m_search.forced_missed;
    } else if (m_options.tuner) {
      pick = tuned_pick(n, f, points, costs, pick);
    }
  }
  m_schedule = {n.id, points[pick]};
  ++m_search.searched;
  m_search.candidates = static_cast<int64_t>(points.size());
  m_search.predicted_ns += predict_matmul(f, points[pick], m_arch).total_ns();
}

}  // namespace wallsim::compiler_stub::lowering
