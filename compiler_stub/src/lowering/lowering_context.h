// The state and shared machinery of lowering one group: LoweringContext, made of the values'
// store (value_store.h) and the emitter (emitter.h, with its DMA-queue planner), and what the
// op families share. Op-family files (lower_*.cpp) build on it and register their lowerings in
// a LoweringTable.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lowering/emitter.h"
#include "lowering/matmul_blocking.h"
#include "lowering/matmul_schedule.h"
#include "lowering/sbuf_allocator.h"
#include "lowering/value_store.h"
#include "wallsim/compiler_stub/graph.h"
#include "wallsim/compiler_stub/lower.h"
#include "wallsim/compiler_stub/lowering_options.h"
#include "wallsim/compiler_stub/plan_builder.h"
#include "wallsim/isa/arch_spec.h"

namespace wallsim::compiler_stub::lowering {

using isa::AccessPattern;
using isa::ActFn;
using isa::AluOp;
using isa::DType;
using isa::Engine;
using isa::Instruction;
using isa::MemSpace;
using isa::Opcode;

// A failure of one op's lowering, or nothing.
using LowerResult = std::optional<CompileError>;

// How an operand meets the output's [rows x cols] iteration space.
enum class Bcast { none, row, column, scalar, batch };

class LoweringContext;
// One op's lowering: emits its instructions into the context's plan.
using LowerFn = std::function<LowerResult(LoweringContext&, const Node&)>;

// Lowerings by op, filled by the family files' populate_*_lowerings().
class LoweringTable {
 public:
  void add(OpKind op, LowerFn fn) { m_fns[static_cast<size_t>(op)] = std::move(fn); }
  const LowerFn* find(OpKind op) const {
    const LowerFn& fn = m_fns[static_cast<size_t>(op)];
    return fn ? &fn : nullptr;
  }

 private:
  std::array<LowerFn, kNumOps> m_fns;
};

// One group's lowering: the values' store (ValueStore: storage, tiling, liveness) and the
// emitter (Emitter: instructions, DMA queues by DmaQueuePlanner, access patterns), tied
// together by what needs both: loading and storing values, SBUF allocation with spilling,
// row windows, strided views, plan constants and derived forms.
class LoweringContext : public Emitter, public ValueStore {
 public:
  LoweringContext(const Graph& graph, const std::vector<int32_t>& group, const GraphUses& uses,
                  const isa::ArchSpec& arch, const LoweringOptions& options,
                  const std::string& plan_name);

  // ---- what is lowered, and where ----
  bool in_window() const { return m_window.has_value(); }
  // Columns of value `id` the current window covers (`cols`, all of them, outside a column
  // window), and the first of them.
  int64_t window_cols(int32_t id, int64_t cols) const;
  int64_t window_col0(int32_t id) const;

  // ---- the pass driver's steps ----
  // Records where each value is used, for freeing and spilling (the group's nodes in order).
  void index_uses(const std::vector<int32_t>& order);
  // Makes `n`, at `position` in the group, the op being lowered: its operands are pinned.
  void begin_node(const Node& n, int position);
  // Loads the weights of the matmuls after `position` ahead of their ops, while SBUF has room.
  void prefetch_weights(int position);
  CompileError too_large_error() const;

  // ---- errors ----
  CompileError error(const std::string& reason) const;  // blamed on the current node
  CompileError no_room() const;  // the working set does not fit (or a view cannot load)

  // ---- storage and tiling ----
  // Tiles of `rows` rows in chunks of at most tile_rows() that never cross a multiple of `run`.
  // Value `id`, when given and inside the current row window, gets the window's tiles only.
  std::optional<Tiles> new_tiles(int64_t rows, int64_t cols, DType dt, const std::string& hint,
                                 int64_t run = 0, int32_t id = -1);
  // The row tiling alone, no storage.
  Tiles tiling(int64_t rows, int64_t cols, DType dt, int64_t run = 0, int32_t id = -1) const;
  std::optional<Tiles> new_tiles_like(const Tiles& like, int64_t cols, DType dt,
                                      const std::string& hint);
  // Per-row fp32 scratch: `cols` values on every partition of one tile.
  std::optional<Tiles> scratch(int64_t cols);
  // The output's tiles: tiled like `like` when it has the same rows, else plainly.
  std::optional<Tiles> output_tiles(const Node& n, const Tiles* like = nullptr);
  // The tiles of the first input with as many rows as `n`'s output: outputs follow its tiling.
  const Tiles* like_of(const Node& n);
  // The on-chip tiles of value `id`, loading them from HBM when the group did not produce it;
  // `after`, when they are loaded, is called with each tile (and their count) once its loads are
  // emitted (a
  // matmul loads its first panel of B after A's first row tiles: loads in the order read).
  std::optional<Tiles> tiles_of(int32_t id,
                                const std::function<void(int64_t, int64_t)>& after = {});
  // A graph input [KT * tile_rows() x N] loaded K-interleaved (Tiles::k_group, a divisor of
  // KT): runs of k_group rows per partition. Tiles already on chip are returned as they are.
  std::optional<Tiles> interleaved_tiles_of(int32_t id, int64_t kt);
  // Row tiles [t0, t1) of value `id` (not on chip), loaded from HBM or its view; the caller
  // releases them.
  std::optional<Tiles> load_tiles(int32_t id, int64_t t0, int64_t t1);
  // A row vector (view [1 x cols]) replicated on every partition: only values in HBM can be
  // broadcast across partitions (a stride-0 row DMA).
  std::optional<Tiles> replicated(int32_t id);
  // Writes value `id` to its HBM tensor: an output of the plan, or plan-internal scratch.
  bool store(int32_t id, isa::TensorRole role = isa::TensorRole::output);
  // Makes sure value `id` is in HBM (group inputs are; produced values are stored as scratch).
  bool ensure_hbm(int32_t id);
  // SBUF for `bytes` per partition, spilling other values when full (spilling.cpp). In a row
  // window, the bytes never used, then the lowest address, unless `oldest_first` (the bytes
  // freed longest ago, as outside windows: for a load that should not wait on recent readers).
  std::optional<Slot> sbuf_alloc(int64_t bytes, const std::string& hint, bool oldest_first = false);
  // A buffer whose contents depend on no value, named by `key` (its shape and contents): built
  // by `build` (false: no room) on first use and kept for the rest of the plan
  // (plan_constants.cpp). Never release it: drop_constants frees those the current op has not
  // asked for when SBUF is full (sbuf_alloc).
  std::optional<Slot> plan_constant(const std::string& key, int64_t bytes,
                                    const std::function<bool(Slot)>& build);
  bool drop_constants();
  // The [parts x parts] identity in `dt` (a plan constant).
  std::optional<Slot> identity(int32_t parts, DType dt);
  // Derived forms (derived_forms.cpp): buffers an op builds from value `id` on chip (a
  // matmul's A^T stationaries) and keeps for a later op that needs the same form, named by
  // `key` within the value (the builder's encoding of its shape), instead of building it
  // again (a layernorm's output read by the q, k and v projections). Kept while `id` is live,
  // freed when it dies (release_dead); under SBUF pressure before any value spills (a form is
  // rebuilt on chip, a spilled value reloaded), except those the current op asked for.
  std::optional<Slot> derived_form(int32_t id, const FormKey& key);
  void keep_derived_form(int32_t id, const FormKey& key, Slot s);
  // Whether an op after the current one reads `id` as a matmul's A (so its A^T may be reused).
  bool matmul_reads_a_later(int32_t id) const;
  bool drop_derived_forms();

  // ---- row windows (row_windows.cpp) ----
  // Whether `n` is too large for SBUF and runs a window of row tiles at a time.
  bool row_windowed(const Node& n) const;
  // The schedule point chosen for matmul `id` as it started (matmul_search.cpp), or null: the
  // blocking queries (matmul_blocking.h) then follow their own rules (today's point).
  const MatmulSchedule* matmul_schedule(int32_t id) const {
    return m_schedule && m_schedule->first == id ? &m_schedule->second : nullptr;
  }
  struct MatmulSearch {
    int64_t searched = 0;     // matmuls whose schedule was chosen from a space
    int64_t candidates = 0;   // points of the last one's space
    double predicted_ns = 0;  // the chosen points' predicted times, summed
    int64_t tuned = 0, tuned_changed = 0, forced_missed = 0;  // as LowerStats' matmul_*
  };
  const MatmulSearch& matmul_search() const { return m_search; }
  LowerResult lower_in_windows(const Node& n, const LowerFn& lower);
  // Fused attentions scheduled from their space (fused_attention_plan.cpp), as MatmulSearch.
  struct {
    int64_t searched = 0, candidates = 0;
    double predicted_ns = 0;
  } attention_search;

  // ---- strided views in HBM (views.cpp) ----
  // The view value `id` is, or the plain row-major view of its own tensor.
  ViewDesc view_of_value(int32_t id) const;
  // `merge` joins adjacent contiguous sub-dims (a plain reshape becomes one run).
  static ViewRows view_rows(const ViewDesc& v, bool merge);
  // Rows [row, row + n) of a view in HBM (within one run), as a DMA access pattern.
  static AccessPattern view_rows_ap(const ViewDesc& v, const ViewRows& vr, Slot src, DType dtype,
                                    int64_t row, int32_t n);
  // Loads a view as row tiles.
  std::optional<Tiles> load_view(const ViewDesc& v, DType dtype, int32_t id = -1);
  // A view that is not on chip, stored by DMA from HBM to HBM.
  bool copy_view(int32_t id, isa::TensorRole role);

  // ---- operands ----
  // How operand `id` broadcasts against `out` [rows x cols], and its tiles.
  LowerResult operand(int32_t id, const Tiles& out, Bcast& how, std::optional<Tiles>& tiles);
  AccessPattern operand_ap(const Tiles& v, Bcast how, int64_t t, int64_t c0, int64_t nc,
                           int32_t rows) const;
  // An error when a last axis of `cols` does not fit one vector instruction.
  LowerResult needs_one_chunk(int64_t cols) const;
  // The plan's index of run-time scalar `name`, declaring it on first use.
  std::optional<int32_t> plan_scalar(const std::string& name);

 private:
  std::optional<Tiles> allocate(Tiles v, const std::string& hint);
  // Spilling (spilling.cpp): frees SBUF by storing the value needed furthest ahead.
  int next_use(int32_t id) const;
  bool spill_one();
  // Row windows (row_windows.cpp).
  bool row_aligned(const Node& n, size_t k) const;
  // Whether an operand of `n` repeats along its batch dims (windows then hold whole runs).
  bool batch_broadcast(const Node& n) const;
  // Whether output column c of `n` needs only column c of its operands as wide as the output.
  bool column_local(const Node& n) const;
  int64_t value_bytes_per_tile(int32_t id) const;
  std::pair<int64_t, int64_t> footprint(const Node& n) const;
  int64_t tile_count(const Node& n) const;
  // Bytes per partition of `n`'s operands on chip, and the share of the rest a window fills.
  int64_t pinned_bytes(const Node& n) const;
  int64_t window_room(const Node& n) const;
  // Whether one row tile needing `one_tile` bytes per partition cannot fit beside the
  // resident operands even with everything else spilled.
  bool too_wide(const Node& n, int64_t one_tile) const;
  // Frees the entries of `kept` the current op has not asked for; whether there were any.
  template <class Key>
  bool drop_unasked(std::map<Key, Kept>& kept) {
    bool dropped = false;
    for (auto it = kept.begin(); it != kept.end();) {
      if (it->second.user == current_node()) {
        ++it;
        continue;
      }
      release(it->second.slot);
      it = kept.erase(it);
      dropped = true;
    }
    return dropped;
  }

  void choose_matmul_schedule(const Node& n);
  // The cost model's pick among `points` (matmul_search.cpp), and the point the options' tuner
  // chooses among the model's best (matmul_tuning.cpp; `pick` where it chooses none).
  size_t model_pick(const MatmulFacts& f, const std::vector<MatmulSchedule>& points) const;
  size_t tuned_pick(const Node& n, const MatmulFacts& f, const std::vector<MatmulSchedule>& points,
                    const std::vector<double>& costs, size_t pick);
  std::pair<int64_t, int64_t> window_fit(const Node& n) const;  // (row tiles fit, of tiles)

  const isa::ArchSpec& m_arch;
  std::optional<std::pair<int32_t, MatmulSchedule>> m_schedule;
  MatmulSearch m_search;
  const LoweringOptions& m_options;
  std::map<std::string, int32_t> m_scalars;
  std::optional<std::string> m_load_error;
  struct Need {  // the current op's footprint as it started (bytes per partition)
    int64_t per_tile, fixed, pinned;
  };
  std::optional<Need> m_need;
  struct Window {
    std::set<int32_t> ids;  // the op's output and its row-aligned operands
    int64_t t0, t1;         // their row tiles in the window
    std::map<int32_t, std::pair<int64_t, int64_t>> own;  // values windowed by other tiles
    std::set<int32_t> col_ids;  // values as wide as the output: in a column window,
    int64_t c0 = 0, cols = 0;   // columns [c0, c0 + cols) of them (cols 0: all columns)
    bool ring = false;          // windows of a streaming ring (lower_in_windows)
  };
  std::optional<Window> m_window;
};

// ---- what families share (the matmul family's blocking: matmul_blocking.h) ----
// Where a transpose runs (lower_layout.cpp): through the array (PSUM, then an evacuation), by
// the DMA engines' hardware transpose of 2-byte elements, or by a DMA reading the source
// element by element.
// Modelled time (ns) one row tile's transpose adds to each resource, and what the op already
// puts on them per row tile: the route costs max over resources of base + added.
// Output column blocks stored as made rotate through as many buffers as the window has row
// tiles (a narrow row tile's footprint holds one each): a block's evacuation need not wait for
// the previous block's store to leave the buffer.
class OutRing {
 public:
  OutRing(LoweringContext& ctx, size_t tiles) : m_ctx(ctx), m_size(std::max<size_t>(1, tiles)) {}
  OutRing(const OutRing&) = delete;
  OutRing& operator=(const OutRing&) = delete;
  ~OutRing() {
    for (Slot s : m_stored) m_ctx.release(s);
  }
  void stored(Slot s) {
    m_stored.push_back(s);
    if (m_stored.size() < m_size) return;
    m_ctx.release(m_stored.front());
    m_stored.pop_front();
  }

 private:
  LoweringContext& m_ctx;
  size_t m_size;
  std::deque<Slot> m_stored;
};

struct ResourceNs {
  double tensor = 0, lanes = 0, dma = 0;
  double bound() const;
};
// The cheapest route for [rows x cols] of `dt` read from HBM, transposed into chunks of
// `chunk` source columns, beside an op whose own work per row tile is `base`
// (isa::CostHints, arch.dma.hardware_transpose); through the array, `per_copy` such blocks share
// one evacuation's fixed cost (side by side in a PSUM bank). The array wins ties.
TransposeRoute cheapest_transpose(const LoweringContext& ctx, int64_t rows, int64_t cols, DType dt,
                                  int64_t chunk, const ResourceNs& base, int64_t per_copy = 1);
// Whether value `id` is a view that is its base [cols x rows] transposed (rows contiguous).
bool transposed_view(const LoweringContext& ctx, int32_t id);
// A transposed view (transposed_view) materialised in its own HBM tensor through the array, by
// blocks of rows (rows of its base loaded contiguous, transposed, stored), where that is priced
// below the strided copy (element by element without a DMA transpose). nullopt: not done (copy
// it as any view); false: no room.
std::optional<bool> transposed_into_hbm_by_array(LoweringContext& ctx, int32_t id);
// How a matmul gets A^T, its stationaries: the array transposes A's row tiles (loaded first),
// unless A is a tensor in HBM and a DMA route is modelled cheaper: then each stationary is
// loaded transposed and A's row tiles are never loaded. A transposed view of B's dtype whose B
// does not stream (no schedule search) takes its base's rows (TransposeRoute::base).
TransposeRoute stationary_route(const LoweringContext& ctx, const Node& n);
// The DMA that loads rows [row0, row0 + rows) x columns [col0, col0 + ks) of the [view] matrix
// in HBM tensor `src` transposed into `dst` (ks partitions x rows). With `base`, the matrix is
// that transposed view of `src` (TransposeRoute::base): the DMA reads src's rows as they are.
void load_transposed(LoweringContext& ctx, Slot dst, Slot src, DType dt, const View& view,
                     int64_t row0, int32_t rows, int64_t col0, int32_t ks,
                     const ViewDesc* base = nullptr);
// How a batch_matmul gets a B that reads HBM transposed ([batch, K, N] with K contiguous): the
// array (array: load_batch_b_by_array) or the strided view's DMA (the other routes: a hardware
// transpose where the chip has one), priced per N row tile beside the op's own work.
TransposeRoute batch_b_route(const LoweringContext& ctx, const Node& n, const ViewDesc& v);
std::optional<Tiles> load_batch_b_by_array(LoweringContext& ctx, const ViewDesc& v, DType dt);
// A matmul's B given as a transposed view whose B does not stream (no schedule search), loaded
// whole through the array (its base's rows contiguous, transposed by K chunks) where that is
// priced below the view's DMA (on trn1, element by element), B whole, as the first column block
// waits for it: the tiles, kept as the view's (tiles_of); nullopt to load the view as any, or
// when the base's rows find no room.
std::optional<Tiles> matmul_b_by_array(LoweringContext& ctx, const Node& n);
// y = softmax (or log-softmax) of each row of x, through `w` (fp32, x's shape; may be x itself)
// and three fp32 columns of `stats` on the same partitions (lower_elementwise.cpp).
void emit_softmax_rows(LoweringContext& ctx, const AccessPattern& x, const AccessPattern& y,
                       const AccessPattern& w, Slot stats, bool log);
// Columns per chunk of a norm too wide for whole rows of gamma, beta and scratch; 0 when it
// runs whole rows (lower_elementwise.cpp).
int64_t norm_chunk_cols(const LoweringContext& ctx, const Node& n);
// The activation function an element-wise unary op is lowered to (lower_elementwise.cpp).
std::optional<ActFn> unary_act(OpKind op);
// A matmul's epilogue, fused by lower.cpp: its int attribute "epilogue_act" (an ActFn) applied
// as PSUM is evacuated, or (a fourth input) a residual added then.
inline constexpr const char* kEpilogueAct = "epilogue_act";
// In-place writes chain: a cache is the graph input at the root of its appends and copies.
int32_t cache_root(const Graph& g, int32_t id);
// An `attention` of one query row lowered with the heads on partitions (decode_row_attention.cpp;
// the other attentions are lower_fused_attention.cpp's).
bool decode_row_attention_applies(const LoweringContext& ctx, const Node& n);
LowerResult lower_decode_row_attention(LoweringContext& ctx, const Node& n);
// A one-row KV append the decode attention splices on chip (decode_row_attention.cpp): input
// `input` (1: K, 2: V) of `attention` is `append` = dynamic_update_slice(cache, update) at a
// run-time row (or a slice of all its rows), `cache` a graph input, and splice_pays.
struct CacheSplice {
  int32_t append = -1, cache = -1, update = -1;
  std::string scalar;
};
std::optional<CacheSplice> cache_splice(const LoweringContext& ctx, const Node& attention,
                                        size_t input);
// Whether one-row attention `n` splices its appended rows rather than reload its caches after
// the writes (compiler.decode_splice; 1: by the isa::CostHints estimates of both variants).
bool splice_pays(const LoweringContext& ctx, const Node& n);
// What attention `n` reads through the appends it splices: their caches' old values and their
// updates (index_uses keeps them live until the attention).
std::vector<int32_t> spliced_reads(const LoweringContext& ctx, const Node& n);
// Whether an attention of the group splices append `dus` (lower_indirect.cpp then loads the
// cache's old rows before the write).
bool spliced_by_attention(const LoweringContext& ctx, const Node& dus);

// A matmul's A as an im2col window of x [N, C, H, W] (or a reshape keeping W last) in HBM,
// with C > 1, made by an im2col (im2col_fed; window_matmul.cpp): A's rows are output pixels
// (n, oh, ow), its columns (c, kh, kw); element (oh·sh + kh·dh, ow·sw + kw·dw) of plane c of
// image n, from `offset` in `base`. Missing dims are 1.
struct WindowFacts {
  int32_t base = -1;
  int64_t offset = 0;
  int64_t N = 1, C = 1, H = 1, W = 1, OH = 1, OW = 1, KH = 1, KW = 1;
  int64_t sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t image = 0;  // elements from one image to the next
};
std::optional<WindowFacts> window_of(const LoweringContext& ctx, int32_t a);
// The window route's fold of matmul `n` (window_matmul.cpp): KH when its kernel rows go into
// the contraction beside the channels (C·KH partitions), 1 when not, the cheaper by the cost
// model of those whose planes fit SBUF; 0 when none fits.
int64_t window_fold(const LoweringContext& ctx, const WindowFacts& w, const Node& n);
// Whether value `a` is an im2col seen through reshapes and transposes (its matmul's B is then
// not prefetched in row tiles: the window route loads it by channels).
bool im2col_fed(const LoweringContext& ctx, int32_t a);
// The window route's point for matmul `n` when its A is a window (window_of) and the cost model
// prices it below the rules' point (compiler.matmul_schedule: -2 never, 0 the rules, > 0 always
// where it fits); its predicted time in `predicted_ns`.
std::optional<MatmulSchedule> window_schedule(const LoweringContext& ctx, const Node& n,
                                              int64_t mode, double* predicted_ns);
LowerResult lower_window_matmul(LoweringContext& ctx, const Node& n);

// The op families, one file each.
void populate_matmul_lowerings(LoweringTable& table);
void populate_elementwise_lowerings(LoweringTable& table);
void populate_layout_lowerings(LoweringTable& table);
void populate_indirect_lowerings(LoweringTable& table);
void populate_attention_lowerings(LoweringTable& table);
void populate_conv_lowerings(LoweringTable& table);        // im2col, broadcast (issue 22)
void populate_activation_lowerings(LoweringTable& table);  // clip, affine (issue 22)
void populate_fused_attention_lowerings(LoweringTable& table);
void populate_collective_lowerings(LoweringTable& table);  // all_reduce, ... (issue 38)
// Every family's lowerings, and `input` (loaded when first used).
const LoweringTable& lowering_table();

}  // namespace wallsim::compiler_stub::lowering
