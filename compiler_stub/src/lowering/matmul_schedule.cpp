// The matmul cost model: a schedule point's time from CostHints — the larger of the array's, the
// lane engines', the DMA engines' and HBM's busy times, plus what cannot overlap them.
#include "lowering/matmul_schedule.h"

#include <algorithm>
#include <sstream>

namespace wallsim::compiler_stub::lowering {

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / std::max<int64_t>(1, b); }

// Engines one transfer of `rows` x `row_bytes` takes at once: pieces of at most split bytes, a
// piece's rows no shorter than the minimum chunk (as Emitter::copy_rows cuts them).
int64_t pieces(const MatmulFacts& f, int64_t rows, int64_t row_bytes) {
  const int64_t want = std::min(f.load_queues, ceil_div(rows * row_bytes, f.dma_split_bytes));
  const int64_t by_cols = std::max<int64_t>(1, std::min(want, row_bytes / f.dma_min_chunk_bytes));
  return std::max<int64_t>(1, by_cols * std::max<int64_t>(1, std::min(want / by_cols, rows)));
}

// Array cycles of multiplies over N columns cut into blocks of `width` (the last one short).
int64_t moving_cycles(int64_t N, int64_t width, int64_t min_cycles) {
  const int64_t blocks = ceil_div(N, width), last = N - (blocks - 1) * width;
  return (blocks - 1) * std::max(width, min_cycles) + std::max(last, min_cycles);
}
}  // namespace

std::string MatmulSchedule::describe() const {
  std::ostringstream o;
  if (conv_window) {
    o << "conv window n=" << panel_cols << " tiles=" << window_tiles;
    return o.str();
  }
  o << (narrow ? "narrow" : "rows") << (k_blocked ? "+kblocked" : "") << (b_whole ? " b=whole" : "")
    << (fine_loads ? " fine" : "") << " n=" << panel_cols << " m_tiles=" << window_tiles
    << " bufs=" << buffers << " a^T=" << name_of(a_route);
  return o.str();
}

size_t find_point(const std::vector<MatmulSchedule>& points, const std::string& text) {
  for (size_t i = 0; i < points.size(); ++i)
    if (points[i].describe() == text) return i;
  return points.size();
}

double MatmulCost::total_ns() const {
  return std::max({tensor_ns, lanes_ns, dma_ns, hbm_ns, store_chain_ns}) + prologue_ns +
         epilogue_ns + window_ns;
}

MatmulCost predict_matmul(const MatmulFacts& f, const MatmulSchedule& s,
                          const isa::ArchSpec& arch) {
  const isa::CostHints& h = arch.costs;
  MatmulCost c;
  const int64_t Mt = ceil_div(f.M, f.tile_rows), Kc = ceil_div(f.K, f.k_rows);
  const int64_t wt = std::max<int64_t>(1, std::min(s.window_tiles, Mt));
  const int64_t windows = ceil_div(Mt, wt);
  const int64_t passes = f.fp32 ? h.fp32_passes() : 1;  // the array's passes per instruction
  const double cycle_ns = 1000.0 / h.tensor_freq_mhz;
  const double lane_ns_per_el = 1.0 / h.vector_elements_per_ns;
  const int64_t width = std::min(f.moving_cols, f.N);
  const int64_t nb = s.b_whole ? width : std::max<int64_t>(1, std::min({s.panel_cols, f.N, width}));
  const int64_t blocks = ceil_div(f.N, nb);

  // B's reads: once per M block; K-blocked, once per turn of as many row tiles as leave each
  // column block of a group its PSUM bank (two banks stay out, as k_blocked emits); whole,
  // once (its row tiles of all columns stay for the op).
  int64_t b_reads = s.b_whole ? 1 : windows;
  int64_t group = s.b_whole ? f.N : nb;  // columns per contiguous DMA row of B
  if (s.k_blocked) {  // blocks of nb columns, side by side in a bank (matmul_blocking.h)
    const int64_t banks = slab_slots(f.psum_banks, f.moving_cols, nb, f.N);
    b_reads = 0;
    for (int64_t w = 0; w < windows; ++w) {
      const int64_t tiles = Mt * (w + 1) / windows - Mt * w / windows;  // balanced windows
      const int64_t per_turn = std::min(tiles, banks);
      b_reads += ceil_div(tiles, per_turn);
    }
    const int64_t per_turn = std::min(wt, banks);
    group = std::min(f.N, std::max<int64_t>(1, banks / per_turn) * nb);
  }

  // The array: every row tile's multiplies over every K chunk and column block, and A^T made
  // through it (one transpose per row tile and K chunk) unless a DMA loads it transposed.
  int64_t cycles = Mt * Kc * moving_cycles(f.N, nb, h.moving_min_cycles) * passes;
  c.matmuls = Mt * Kc * blocks;
  const bool a_by_array = s.narrow || s.a_route == TransposeRoute::array;
  if (a_by_array) {
    cycles += Mt * Kc * std::max(std::min(f.tile_rows, f.M), h.moving_min_cycles) * passes;
    c.matmuls += Mt * Kc;
  }
  // A transposed B view: each read loads its base's rows and transposes them through the array.
  // (Their array time is in the chain below.)
  // A panel's base rows go through the array a block of at most tile_rows at a time.
  const int64_t bt_blocks = blocks * ceil_div(std::min(nb, f.N), f.tile_rows);
  if (f.b_transposed) c.matmuls += b_reads * bt_blocks * Kc;
  c.tensor_ns = double(cycles) * cycle_ns;

  // The lanes (vector and scalar, half each): an evacuation per output block and per group of a
  // row tile's A^T chunks (at_group; a narrow A read from HBM chunk by chunk: one a chunk).
  double lanes = double(Mt * blocks) * (double(h.vector_fixed_ns) + double(nb) * lane_ns_per_el);
  if (a_by_array) {
    const int64_t full = f.K / f.k_rows, part = f.K % f.k_rows ? 1 : 0;
    const int64_t evacuations =
        s.narrow && f.a_loaded
            ? Kc
            : at_evacuations(full, part,
                             at_group(arch.psum.bank_bytes,
                                      std::min(arch.vector.free_max, arch.scalar.free_max),
                                      f.tile_rows, wt == 1));
    lanes += double(Mt * evacuations) * double(h.vector_fixed_ns) +
             double(Mt * Kc) * double(f.tile_rows) * lane_ns_per_el;
  }
  c.lanes_ns = lanes / 2;
  // A transposed B's panels: each block of its base's rows is transposed and evacuated chunk by
  // chunk before a multiply reads it; the array waits for each pair's result (its pipeline
  // latency, the lane's access and evacuation), so the chain adds to the array's time.
  if (f.b_transposed) {
    const double pair =
        double(std::max(f.tile_rows, h.moving_min_cycles) * passes + h.tensor_latency_cycles) *
            cycle_ns +
        double(h.vector_fixed_ns + h.lane_access_ns) + double(f.tile_rows) * lane_ns_per_el;
    c.tensor_ns += double(b_reads * bt_blocks * Kc) * pair;
  }

  // DMA: payload plus the chunk overhead of every contiguous run, over every engine.
  const double a_pay = double(f.M) * double(f.K) * double(f.a_bytes);
  const double b_pay = double(f.K) * double(f.N) * double(f.b_bytes);
  const double o_pay = double(f.M) * double(f.N) * double(f.out_bytes);
  double engine = 0, payload = 0;
  if (f.a_loaded) {
    double chunks = double(f.M);  // whole rows
    if (s.narrow) {
      chunks = double(f.M) * double(Kc);  // a K chunk of each row at a time
    } else if (s.a_route == TransposeRoute::dma_transpose) {
      chunks = a_pay / double(std::max<int64_t>(1, h.dma_transpose_chunk_bytes));
    } else if (s.a_route == TransposeRoute::strided_dma) {
      chunks = a_pay / double(f.a_bytes);
    }
    if (s.a_route == TransposeRoute::base) {
      chunks = double(f.K) * double(Mt);  // the base's rows, a row tile's columns at a time
    } else if (f.a_transposed && !s.narrow) {
      chunks = a_pay / double(f.a_bytes);  // a view's rows: element-strided
    }
    engine += h.dma_engine_bytes(a_pay, chunks);
    payload += a_pay;
  }
  const double b_chunks = f.b_transposed ? double(f.N) : double(f.K) * double(ceil_div(f.N, group));
  engine += double(b_reads) * h.dma_engine_bytes(b_pay, b_chunks);
  payload += double(b_reads) * b_pay;
  const double o_chunks = s.narrow ? double(f.M) * double(blocks) : double(f.M);
  engine += h.dma_engine_bytes(o_pay, o_chunks);
  payload += o_pay;
  const double dma_bytes_per_ns = h.dma_gb_per_s * double(f.dma_engines);
  // B streams through as many engines as its transfers in flight cut into pieces: a panel's K
  // chunks all load ahead of its multiplies, the next panel's while it is read (its buffers),
  // a ring's slabs buffers - 1 ahead.
  const double b_engine = double(b_reads) * h.dma_engine_bytes(b_pay, b_chunks);
  // A transposed B loads a panel's base rows, a block of at most tile_rows of them at a time
  // (whole rows of K), the next panel's after this one's multiplies.
  const int64_t bt_rows = std::min({nb, f.N, f.tile_rows});
  const int64_t in_flight =
      s.b_whole        ? Kc * pieces(f, f.k_rows, f.N * f.b_bytes)
      : s.k_blocked    ? (s.buffers - 1) * pieces(f, f.k_rows, group * f.b_bytes)
      : f.b_transposed ? s.buffers * ceil_div(nb, bt_rows) * pieces(f, bt_rows, f.K * f.b_bytes)
                       : s.buffers * Kc * pieces(f, f.k_rows, nb * f.b_bytes);
  const double b_engines = double(std::min(f.dma_engines, in_flight));
  c.dma_ns = std::max(engine / dma_bytes_per_ns, b_engine / (b_engines * h.dma_gb_per_s));
  // A transposed A view loaded by rows: one descriptor of element chunks per row tile, on one
  // engine each (by K chunks, narrow, its pieces spread over the engines like any load).
  if (f.a_transposed && !s.narrow && s.a_route != TransposeRoute::base) {
    const double a_engines = double(std::min(f.dma_engines, Mt));
    c.dma_ns = std::max(c.dma_ns, h.dma_engine_bytes(a_pay, a_pay / double(f.a_bytes)) /
                                      (a_engines * h.dma_gb_per_s));
  }
  // HBM: the payload at the core's share of its bandwidth (chunk overheads are engine time).
  c.hbm_ns = h.hbm_gb_per_s > 0 ? payload / h.hbm_gb_per_s : 0;
  c.hbm_bytes = static_cast<int64_t>(payload);

  if (s.narrow) {
    const int64_t rows = std::min(f.tile_rows, f.M);
    const double block = h.dma_engine_bytes(double(rows * nb * f.out_bytes), double(rows));
    const double ring = double(std::min(wt, f.dma_engines));
    c.store_chain_ns +=
        double(Mt * blocks) *
        (block / h.dma_gb_per_s + double(h.vector_fixed_ns) + double(nb) * lane_ns_per_el) / ring;
  }

  // What does not overlap. The array's first multiply waits for the window's A^T, made first
  // (one row tile: a few K chunks ahead, kStationaryLead in lower_matmul.cpp), and for the
  // first panel (slab): A's first row tile lands before its transposes start, and the panel,
  // sharing the engines with it, lands by (A's tile + panel) / rate while those transposes
  // (array time, counted above) run: only what is left of its wait is exposed. At each later
  // M block its A again, and by rows the previous block's output rows, stored as it ends
  // (row_windows.cpp) ahead of the next block's loads. After the last multiply: the last
  // block's output (by rows, the block's rows; by column blocks, one block), evacuated and
  // stored. The first and last transfers move at all the engines' rate, as far as HBM keeps
  // up, and each pays a descriptor's issue and HBM's latency; the last result leaves the
  // array's pipeline and the lanes' access latency before its store.
  const double rate =
      h.hbm_gb_per_s > 0 ? std::min(dma_bytes_per_ns, h.hbm_gb_per_s) : dma_bytes_per_ns;
  const double transfer_latency = double(h.dma_issue_ns + h.hbm_latency_ns);
  const int64_t rows = std::min(f.tile_rows, f.M);
  const double a_tile = f.a_loaded ? double(rows) * double(f.K) * double(f.a_bytes) : 0.0;
  const double first_b = s.k_blocked ? double(f.k_rows) * double(group) * double(f.b_bytes)
                         : s.b_whole ? double(f.K) * double(f.N) * double(f.b_bytes)
                                     : double(f.K) * double(nb) * double(f.b_bytes);
  // B whole loads after A's row tiles of the window when the array makes A^T (both are
  // loaded before the multiplies, A first); a panel follows the first row tile's (or, a DMA
  // route, B whole goes first and the first A^T tile after it).
  const double a_before = s.b_whole && a_by_array && !s.narrow ? double(wt) * a_tile : a_tile;
  // The first B transfers move over as many engines as they are cut into pieces (B whole:
  // each K chunk's rows of all columns; a panel: each of its K chunks; a slab: one).
  const int64_t first_pieces = f.b_transposed ? in_flight
                               : s.k_blocked
                                   ? pieces(f, f.k_rows, group * f.b_bytes)
                                   : Kc * pieces(f, f.k_rows, (s.b_whole ? f.N : nb) * f.b_bytes);
  const double b_rate =
      s.fine_loads ? rate
                   : std::min(rate, double(std::min(f.dma_engines, first_pieces)) * h.dma_gb_per_s);
  const int64_t lead =
      wt == 1 && !(s.narrow && f.a_loaded) && !s.k_blocked ? std::min(kStationaryLead, Kc) : Kc;
  const double ahead =
      a_by_array ? double(wt * lead * std::max(rows, h.moving_min_cycles) * passes) * cycle_ns
                 : 0.0;
  double first_a = a_tile / rate;
  if (s.narrow && f.a_loaded) {
    // A narrow A in HBM is read by K chunks, one descriptor on one engine each, and the
    // window's A^T is all made before its first multiply, at every M block: its pieces move
    // as many at a time as there are engines.
    const double piece =
        h.dma_engine_bytes(double(rows) * double(f.k_rows) * double(f.a_bytes), double(rows)) /
            h.dma_gb_per_s +
        transfer_latency;
    first_a = std::max(first_a, double(wt * Kc) * piece / double(std::min(f.dma_engines, wt * Kc)));
  }
  c.prologue_ns = double(h.launch_ns) + transfer_latency +
                  std::max(first_a, a_before / rate + first_b / b_rate - ahead);
  // Narrow, a transposed A view is materialised in HBM before the multiplies (lower_matmul.cpp,
  // ensure_hbm): its base read by the hardware transpose's chunks where the chip has one, else
  // by row tiles of its rows (an under-estimate on trn1, see docs/COMPILER.md), and the copy
  // written by rows, over every engine, as far as HBM keeps up; then
  // read by K chunks like any narrow A (above).
  if (s.narrow && f.a_transposed) {
    const bool hw =
        arch.dma.hardware_transpose && f.a_bytes == 2 && h.dma_transpose_chunk_bytes > 0;
    const double read_chunks =
        hw ? a_pay / double(h.dma_transpose_chunk_bytes) : double(f.K) * double(Mt);
    const double copy =
        h.dma_engine_bytes(a_pay, read_chunks) + h.dma_engine_bytes(a_pay, double(f.M));
    c.prologue_ns +=
        std::max(copy / dma_bytes_per_ns, h.hbm_gb_per_s > 0 ? 2 * a_pay / h.hbm_gb_per_s : 0.0) +
        transfer_latency;
  }
  const double window_out = double(ceil_div(f.M, windows)) * double(f.N) * double(f.out_bytes);
  // By rows, each row tile's store leaves as its last column block is evacuated (byte-range
  // semaphores), so the window's stores overlap its last column block's multiplies: after the
  // last multiply, what of them that block did not hide, at least the last tile's.
  const int64_t last_cols = f.N - (blocks - 1) * nb;
  const double last_block_ns =
      double(wt * Kc * std::max(last_cols, h.moving_min_cycles) * passes) * cycle_ns;
  const double tile_out = double(rows) * double(f.N) * double(f.out_bytes);
  const double last_out_ns = s.narrow
                                 ? double(rows) * double(nb) * double(f.out_bytes) / rate
                                 : std::max(tile_out / rate, window_out / rate - last_block_ns);
  c.epilogue_ns = last_out_ns + double(h.vector_fixed_ns) + double(nb) * lane_ns_per_el +
                  double(h.tensor_latency_cycles) * cycle_ns + double(h.lane_access_ns) +
                  transfer_latency;
  c.window_ns = double(windows - 1) * (first_a + (s.narrow ? 0.0 : window_out / rate));
  return c;
}

}  // namespace wallsim::compiler_stub::lowering
