// The lowering's heuristics as config (`compiler.*` keys): how DMA is spread over queues, when
// an op runs in row windows, when a matmul operand streams. Design choices, not chip facts;
// the defaults are the values the lowering was written with.
#pragma once

#include <cstdint>
#include <string>

#include "wallsim/base/params.h"

namespace wallsim::compiler_stub {

class ScheduleTuner;  // tuning.h

// Measured tuning (`compiler.tune.*`, docs/COMPILER.md "Measured tuning"): off by default.
struct TuneOptions {
  int64_t enabled = 0;     // 1: matmuls' top candidates simulated where the cache has no entry
  int64_t candidates = 4;  // the model's best this-many points measured per op
  std::string cache;       // tuning cache file (JSON); empty: none
};

template <class V>
void describe(V& v, TuneOptions& o) {
  v.field("enabled", o.enabled, {0, 1}, "flag",
          "design choice: 1 (or `--tune`) simulates, for each searched matmul the tuning cache "
          "has no entry for, the cost model's best `candidates` points compiled as one-op plans "
          "on a core of the run's own chip config and keeps the fastest (where the compile runs "
          "outside a simulation: `wallsim compile`, `wallsim validate shapes`; `run` and sweeps "
          "compile inside one and only reuse the cache); 0 takes the model's pick, or the "
          "cache's where `cache` names one");
  v.field("candidates", o.candidates, {1, 64}, "points",
          "design choice: how many of the cost model's best points are simulated per op (its "
          "pick among them); part of the cache key");
  v.field("cache", o.cache,
          "tuning cache file (`--tuning-cache`): entries keyed by op family, shapes, dtypes, "
          "operand layouts, arch fingerprint, chip timing and compiler build id, each holding "
          "the measured pick and the model's; read where given, written back by `compile` and "
          "`validate shapes` after tuning; empty: none");
}

struct LoweringOptions {
  int64_t dma_split_bytes = 256 * 1024;           // a row-block transfer above this is split
  int64_t dma_min_chunk_bytes = 4096;             // a split never cuts rows below this
  int64_t load_queues_per_engine = 2;             // DMA queues for loads, per DMA engine
  int64_t store_queues_per_engine = 1;            // DMA queues for stores, per DMA engine
  int64_t dma_dependent_split_bytes = 32 * 1024;  // a load that waits for compute is split finer
  int64_t prefetch_ops = 16;                      // matmul weights loaded up to this many ops ahead
  int64_t prefetch_reserve_percent = 25;          // of SBUF: kept free of prefetched weights
  int64_t row_window_trigger_percent = 50;        // of SBUF: a larger working set runs in windows
  int64_t row_window_fill_percent = 75;           // of the SBUF left: what one window may fill
  int64_t streamed_operand_percent = 25;          // of SBUF: a larger matmul B streams in parts
  int64_t panel_pair_percent = 50;                // of SBUF: two panels of a streamed B at most
  int64_t attention_pipeline_percent = 50;        // of SBUF: 3 sequences in flight if they fit
  int64_t attention_schedule = -1;  // -1: the cost model's best point, -2: the rules, k: point k
  int64_t decode_splice = 1;        // 0 never, 1 by cost estimate, 2 always
  int64_t max_plan_instructions = 4000000;  // a plan needing more is a compile error
  int64_t schedule_across_ops = 0;          // 1: streams list-scheduled (lowering/schedule.h)
  int64_t matmul_k_interleave = 1;          // 1: a one-row-tile matmul's weight loads K-interleaved
  int64_t matmul_schedule = -1;  // -1: the cost model's best point, -2: the rules, k: point k
  TuneOptions tune;
  // Not config (no describe() line): set by the caller. `tuner`: consulted for matmuls whose
  // schedule is searched (compiler.matmul_schedule -1), when compiler.tune is on or names a cache.
  // `forced_point`: the point (describe() text) every searched matmul takes, for a tuner's
  // one-op measurement; where the space holds no such point, LowerStats::matmul_forced_missed.
  ScheduleTuner* tuner = nullptr;
  std::string forced_point;
};

template <class V>
void describe(V& v, LoweringOptions& o) {
  v.field("dma_split_bytes", o.dma_split_bytes, {1, INT64_MAX}, "bytes",
          "design choice: a tile-to-HBM transfer above this size is split by columns (or, when "
          "its rows are too short to cut, by partitions) over several queues, so one big "
          "transfer is not serialised on one DMA engine");
  v.field("dma_min_chunk_bytes", o.dma_min_chunk_bytes, {1, INT64_MAX}, "bytes",
          "design choice: a transfer is split by columns only while each piece's rows stay at "
          "least this long (else by partitions), and an HBM-to-HBM view copy (one piece per "
          "store queue) never cuts a piece below this much DMA-engine work, since the DMA cost "
          "model charges every contiguous chunk (timing.dma.chunk_overhead_bytes)");
  v.field("load_queues_per_engine", o.load_queues_per_engine, {1, 16}, "queues",
          "design choice: DMA queues a plan loads through, per DMA engine (at most "
          "arch.dma.engines x queues_per_engine less the store queues in all), so that several "
          "share an engine and one's descriptor issue overlaps another's transfer; with two or "
          "more per engine, loads of plan inputs and loads of values the plan writes take "
          "separate queues; each transfer takes the queue of the engine with the fewest bytes "
          "so far");
  v.field("store_queues_per_engine", o.store_queues_per_engine, {1, 16}, "queues",
          "design choice: DMA queues a plan stores through, per DMA engine, apart from the "
          "loads so a store waiting for a result never holds up the prefetch behind it");
  v.field("dma_dependent_split_bytes", o.dma_dependent_split_bytes, {1, INT64_MAX}, "bytes",
          "design choice: a load of a value the plan writes (it waits for compute, and compute "
          "waits for it: a KV cache row block after its update) is split into pieces of at "
          "least this size (instead of dma_split_bytes) over more queues, for a short latency");
  v.field("prefetch_ops", o.prefetch_ops, {0, 1024}, "ops",
          "design choice: after each op, the weights (graph inputs, loaded whole) of the "
          "matmuls of one row tile among the next this-many ops are loaded ahead, in order, "
          "so that they stream while the ops before them compute (0: no prefetch)");
  v.field("prefetch_reserve_percent", o.prefetch_reserve_percent, {0, 100}, "%",
          "design choice: weights are prefetched only while this share of SBUF stays free "
          "for the ops' own values");
  v.field("row_window_trigger_percent", o.row_window_trigger_percent, {1, 100}, "%",
          "design choice: a row-local op whose working set exceeds this share of SBUF runs a "
          "window of row tiles at a time, streaming through HBM");
  v.field("row_window_fill_percent", o.row_window_fill_percent, {1, 100}, "%",
          "design choice: the share of the SBUF left (after resident operands and fixed "
          "needs) that one row window fills");
  v.field("streamed_operand_percent", o.streamed_operand_percent, {1, 100}, "%",
          "design choice: a matmul's B (or a batch_matmul's B) larger than this share of SBUF "
          "is streamed by column panels (batch chunks) instead of loaded whole");
  v.field("panel_pair_percent", o.panel_pair_percent, {1, 100}, "%",
          "design choice: panels of a streamed B are narrowed until two of them (double "
          "buffering) take at most this share of SBUF");
  v.field("attention_pipeline_percent", o.attention_pipeline_percent, {1, 100}, "%",
          "design choice: decode_attention keeps three sequences in flight (software "
          "pipelining) when their state takes at most this share of SBUF, else one");
  v.field("decode_splice", o.decode_splice, {0, 2}, "mode",
          "design choice: whether a one-row attention over KV caches, each appended one row at a "
          "run-time position in the plan, loads the caches' old rows before the appends and "
          "splices the new rows in on chip instead of reloading the caches after the writes: "
          "0 never, 2 always, 1 when the compiler's estimate (isa::CostHints) of the splice's "
          "extra array and vector work is below that of the reload the Q projection's weight "
          "stream does not hide (on trn2 at d_model 768: reload up to 256 rows, splice from "
          "512)");
  v.field("max_plan_instructions", o.max_plan_instructions, {1, INT64_MAX}, "instructions",
          "design choice: lowering stops with a compile error once a plan has this many "
          "instructions (an op tiled to fit a small chip can need millions, and compiling "
          "and simulating them takes minutes and gigabytes)");
  v.field("schedule_across_ops", o.schedule_across_ops, {0, 1}, "flag",
          "design choice: 1 reorders every stream of a lowered plan by a list schedule (an "
          "engine whose next instruction waits on another takes independent later work, e.g. "
          "the next op's, first; accesses to the same bytes keep their order); 0 keeps the "
          "order the ops were lowered in");
  v.field("matmul_k_interleave", o.matmul_k_interleave, {0, 1}, "flag",
          "design choice: 1 loads the weight B [K x N] of a matmul with one row tile of A (a "
          "decode step's) as its row-major bytes on tile-rows partitions, each partition K / "
          "tile-rows consecutive rows (one long DMA chunk instead of one per row, which "
          "timing.dma.chunk_overhead_bytes charges), and contracts K chunk k against A's "
          "columns k, k + K / tile-rows, ...; 0 loads B by plain row tiles");
  v.field("attention_schedule", o.attention_schedule, {-2, 1 << 20}, "point",
          "design choice: how a fused attention is scheduled (docs/COMPILER.md, Attention "
          "schedule): -1 takes the point of its schedule space (one online pass or a maxima "
          "pass first, heads per group, K^T kept per sequence or made per step, mask tiles "
          "kept, row sums by the array) the cost model predicts fastest from the chip's "
          "figures; -2 the fixed rules alone; k >= 0 the k-th point enumerated (0: the rules' "
          "point; the last when there are fewer), for studies of the model");
  v.field("matmul_schedule", o.matmul_schedule, {-2, 1 << 20}, "point",
          "design choice: how a matmul whose B streams from HBM is blocked (docs/COMPILER.md, "
          "Schedule search): -1 takes the point of its schedule space (M and N blocks, output "
          "by rows or column blocks, K-blocked B, how A^T is made) the cost model predicts "
          "fastest from the chip's figures; -2 the fixed rules alone; k >= 0 the k-th point "
          "enumerated (0: the rules' point; the last when there are fewer), for studies of "
          "the model");
  v.section("tune", o.tune, "measured tuning of schedule points (off by default)");
}

}  // namespace wallsim::compiler_stub
