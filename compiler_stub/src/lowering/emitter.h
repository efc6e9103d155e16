// The emitter of one group's plan: instructions into engine streams and DMA queues (queues
// chosen by its DmaQueuePlanner), transfer splitting, PSUM banks, the lane engines' balance,
// and the access patterns instructions read and write.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "lowering/value_store.h"
#include "wallsim/compiler_stub/dma_queues.h"
#include "wallsim/compiler_stub/lowering_options.h"
#include "wallsim/compiler_stub/plan_builder.h"
#include "wallsim/isa/arch_spec.h"

namespace wallsim::compiler_stub::lowering {

using isa::AccessPattern;
using isa::ActFn;
using isa::AluOp;
using isa::Engine;
using isa::Instruction;
using isa::Opcode;

// Owns the plan being built. Every instruction is tagged with the current op (begin_op) and
// counted; nothing here allocates storage or knows about values beyond their tiles.
class Emitter {
 public:
  Emitter(const isa::ArchSpec& arch, const LoweringOptions& options, const std::string& plan_name,
          int32_t tile_rows);

  const isa::ArchSpec& arch() const { return m_arch; }
  const LoweringOptions& options() const { return m_options; }
  PlanBuilder& builder() { return m_builder; }
  const DmaQueuePlanner& queues() const { return m_queues; }

  // ---- the op instructions are emitted for ----
  // Op `node` at `position` in the group: its instructions are tagged with it; the lane
  // engines' balance (evacuate) starts again.
  void begin_op(int32_t node, int position);
  int32_t current_node() const { return m_current_node; }
  int position() const { return m_position; }
  // Loads for op `node` at `position`, later in the group, emitted now (weight prefetch):
  // tagged with that op and queued as its prefetch (DmaQueuePlanner::begin_prefetch).
  void begin_prefetch(int32_t node, int position);
  void end_prefetch(int32_t resumed_node);
  bool prefetching() const { return m_queues.prefetching(); }
  // Whether the plan has outgrown compiler.max_plan_instructions (lowering then stops).
  bool too_large() const { return m_emitted > m_options.max_plan_instructions; }

  // ---- access patterns ----
  // `cols` elements from `offset` on partitions 0..parts of buffer `s`.
  static AccessPattern sbuf_ap(Slot s, DType dt, int32_t parts, int64_t offset, int64_t cols);
  static AccessPattern tile_ap(const Tiles& v, int64_t t, int64_t col0, int64_t ncols) {
    return sbuf_ap(v.tiles[t], v.dtype, v.rows_in(t), v.col_base + col0, ncols);
  }
  static AccessPattern hbm_ap(Slot s, DType dt, const View& view, int64_t row0, int32_t rows,
                              int64_t col0, int64_t ncols);
  static AccessPattern psum_ap(Slot bank, int32_t partitions, int64_t cols, int64_t offset = 0);
  // Column c of a [rows x k] buffer, broadcast along `ncols` free elements.
  static AccessPattern broadcast_column(AccessPattern col, int64_t ncols);
  // The int32 ids (a 1-D tensor in HBM) of row tile `t` of `rows`: one per partition.
  static AccessPattern ids_ap(Slot ids, const Tiles& rows, int64_t t);

  // ---- DMA ----
  // The load (store) queue for the next transfer (DmaQueuePlanner::next_load). A load's queue
  // is settled in emit() (DmaQueuePlanner::place_load): loads of plan inputs and loads of
  // values the plan writes take separate queues, so a reload waiting for a result never holds
  // up the weight prefetch queued behind it.
  int next_load_queue() const { return m_queues.next_load(); }
  int next_store_queue() const { return m_queues.next_store(); }
  // The one queue every send and recv of the plan takes (the first one's store queue): they
  // run in program order, so a rank issues them in the order its peers match them by.
  int point_to_point_queue() {
    if (m_p2p_queue < 0) m_p2p_queue = next_store_queue();
    return m_p2p_queue;
  }
  // The one queue every all_reduce, all_gather and reduce_scatter of the plan takes, in program
  // order (NCCL's one communication stream; every rank issues them in the same order): a queue
  // of its own, declared at the plan's first collective (a plan without one is unchanged), so
  // the stores queued after a collective, and the compute waiting for them, do not wait for the
  // collective to complete on every rank. A plan that declares every queue already (tiny)
  // dedicates its least loaded store queue, taken out of the store rotation.
  int collective_queue();
  // A queue beside the input prefetch queues (the dependent loads'): a plan input loaded for a
  // later phase (the next window's stationaries) shares the engines with the prefetch behind
  // it instead of queueing in front of it.
  int next_side_load_queue() const { return m_queues.next_side_load(); }
  // A row-block copy between a tile and HBM, split by columns over several queues when it is
  // large, so one big transfer is not serialised on one DMA engine.
  // `fine`: cut as finely as a load that waits for compute (a copy nothing after it overlaps).
  void copy_rows(bool load, AccessPattern dst, AccessPattern src, bool fine = false);
  // While set, every load is cut `fine` (a matmul whose schedule loads its operands in the
  // order the multiplies read them: the first pieces then take every queue, not one each).
  void set_fine_loads(bool on) { m_fine_loads = on; }
  bool fine_loads() const { return m_fine_loads; }
  void dma(int queue, const AccessPattern& dst, const AccessPattern& src);

  // ---- compute ----
  void emit(int stream, Instruction in);
  int stream(Engine engine) { return m_builder.stream(engine); }
  static Instruction vec(Opcode op, const AccessPattern& dst);
  void tensor_tensor(AluOp alu, const AccessPattern& dst, const AccessPattern& a,
                     const AccessPattern& b);
  void tensor_scalar(AluOp alu, const AccessPattern& dst, const AccessPattern& a, double s,
                     bool reverse = false);
  void reduce(AluOp alu, const AccessPattern& dst, const AccessPattern& src);
  void activation(ActFn fn, const AccessPattern& dst, const AccessPattern& src, double scale = 1,
                  double bias = 0, const AccessPattern* accum = nullptr);
  // PSUM -> SBUF on whichever of the vector and scalar engines has the less modelled busy
  // time in this op so far (lane_cost summed over what each was given, the vector engine's weighted
  // by vector_cost_percent(); the vector engine on a tie). With `add`, dst = psum + add (a
  // matmul's bias): on the vector engine, the only one that adds a tensor operand.
  void evacuate(const AccessPattern& dst, const AccessPattern& psum,
                const AccessPattern* add = nullptr);
  int64_t lane_cost(const Instruction& in) const;
  // A lane instruction's fixed overhead in element-cycles: CostHints::vector_fixed_ns at the
  // vector engine's element rate (100 on trn2 and trn1, 20 on tiny; 0 without cost hints).
  static int64_t lane_overhead(const isa::CostHints& costs);
  // The vector engine's time per element-cycle as a share of the scalar engine's, in percent:
  // the scalar engine's element rate over the vector engine's (isa::CostHints; 125 on trn2's
  // 1.2 and 0.96 GHz).
  static int64_t vector_cost_percent(const isa::CostHints& costs);
  void emit_transpose(const AccessPattern& dst, const AccessPattern& src);
  void emit_matmul(const AccessPattern& dst, const AccessPattern& stationary,
                   const AccessPattern& moving, bool start, bool stop);
  // PSUM banks: the next in rotation, or bank k.
  Slot next_bank() { return m_psum_banks[m_next_bank++ % m_psum_banks.size()]; }
  Slot psum_bank(size_t k) const { return m_psum_banks[k]; }
  int64_t psum_bank_count() const { return static_cast<int64_t>(m_psum_banks.size()); }
  // Elements one vector or scalar instruction may span along the free axis.
  int64_t free_chunk() const { return std::min(m_arch.vector.free_max, m_arch.scalar.free_max); }
  // Calls f(t, rows, c0, nc) for every row tile t of `v` and every run of its columns short
  // enough for one vector or scalar instruction.
  template <class F>
  void for_each_chunk(const Tiles& v, F&& f) const {
    for (int64_t t = 0; t < v.count(); ++t) {
      for (int64_t c0 = 0; c0 < v.cols; c0 += free_chunk()) {
        f(t, v.rows_in(t), c0, std::min(free_chunk(), v.cols - c0));
      }
    }
  }

 private:
  const isa::ArchSpec& m_arch;
  const LoweringOptions& m_options;
  PlanBuilder m_builder;
  DmaQueuePlanner m_queues;
  std::vector<Slot> m_psum_banks;
  size_t m_next_bank = 0;
  int32_t m_current_node = -1;
  int m_position = 0;  // of the current op in the group
  bool m_fine_loads = false;
  int64_t m_vector_cost_percent = 100;
  int64_t m_lane_overhead = 0;      // lane_overhead(arch.costs)
  int64_t m_lane_busy[2] = {0, 0};  // modelled vector, scalar busy so far (lane_cost, weighted)
  int64_t m_emitted = 0;            // instructions
  int m_p2p_queue = -1;             // point_to_point_queue(), once chosen
  int m_cc_queue = -1;              // collective_queue(), once made
};

// Loads cut fine (Emitter::set_fine_loads) while in scope; the setting before comes back after.
class FineLoadsScope {
 public:
  FineLoadsScope(Emitter& e, bool on) : m_emitter(e), m_was(e.fine_loads()) {
    e.set_fine_loads(on);
  }
  ~FineLoadsScope() { m_emitter.set_fine_loads(m_was); }
  FineLoadsScope(const FineLoadsScope&) = delete;
  FineLoadsScope& operator=(const FineLoadsScope&) = delete;

 private:
  Emitter& m_emitter;
  bool m_was;
};

}  // namespace wallsim::compiler_stub::lowering
