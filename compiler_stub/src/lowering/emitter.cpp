// Emitter: instructions into streams and DMA queues, transfer splitting, PSUM banks, the lane
// engines' balance, access patterns.
#include "lowering/emitter.h"

#include <cmath>

namespace wallsim::compiler_stub::lowering {

Emitter::Emitter(const isa::ArchSpec& arch, const LoweringOptions& options,
                 const std::string& plan_name, int32_t tile_rows)
    : m_arch(arch),
      m_options(options),
      m_builder(plan_name),
      m_queues(arch.dma.engines),
      m_vector_cost_percent(vector_cost_percent(arch.costs)),
      m_lane_overhead(lane_overhead(arch.costs)) {
  // Loads and stores on separate queues, so a store waiting for a result never holds up the
  // prefetch behind it; the queues cover every DMA engine (dma_queue_layout).
  for (const QueueSpec& q :
       dma_queue_layout(arch.dma.engines, arch.dma.queues_max(), options.load_queues_per_engine,
                        options.store_queues_per_engine)) {
    m_queues.add_queue(m_builder.add_queue(q.name, static_cast<int32_t>(q.engine)), q.engine,
                       q.cls);
  }
  const int banks = static_cast<int>(arch.psum.bytes_per_partition / arch.psum.bank_bytes);
  for (int k = 0; k < banks; ++k) {
    m_psum_banks.push_back(m_builder.add_buffer(
        MemSpace::psum, 0, tile_rows, k * arch.psum.bank_bytes, arch.psum.bank_bytes, "psum"));
  }
}

int Emitter::collective_queue() {
  if (m_cc_queue >= 0) return m_cc_queue;
  if (m_queues.queue_count() < m_arch.dma.queues_max()) {
    m_cc_queue = m_builder.add_queue("cc0", 0);
    m_queues.add_queue(m_cc_queue, 0, QueueClass::collective);
  } else {
    m_cc_queue = next_store_queue();
    m_queues.take_store(m_cc_queue);
  }
  return m_cc_queue;
}

void Emitter::begin_op(int32_t node, int position) {
  m_current_node = node;
  m_position = position;
  m_lane_busy[0] = m_lane_busy[1] = 0;  // evacuate() balances the lane engines within an op
}

void Emitter::begin_prefetch(int32_t node, int position) {
  m_current_node = node;
  m_queues.begin_prefetch(position);
}

void Emitter::end_prefetch(int32_t resumed_node) {
  m_queues.end_prefetch();
  m_current_node = resumed_node;
}

// ---- access patterns ----
AccessPattern Emitter::sbuf_ap(Slot s, DType dt, int32_t parts, int64_t offset, int64_t cols) {
  AccessPattern ap;
  ap.space = MemSpace::sbuf;
  ap.buffer = s.index;
  ap.dtype = dt;
  ap.partitions = parts;
  ap.offset = offset;
  ap.num_free = 1;
  ap.free[0] = {cols, 1};
  return ap;
}

AccessPattern Emitter::hbm_ap(Slot s, DType dt, const View& view, int64_t row0, int32_t rows,
                              int64_t col0, int64_t ncols) {
  AccessPattern ap;
  ap.space = MemSpace::hbm;
  ap.buffer = s.index;
  ap.dtype = dt;
  ap.partitions = rows;
  ap.partition_stride = view.cols;
  ap.offset = row0 * view.cols + col0;
  ap.num_free = 1;
  ap.free[0] = {ncols, 1};
  return ap;
}

AccessPattern Emitter::psum_ap(Slot bank, int32_t partitions, int64_t cols, int64_t offset) {
  AccessPattern ap;
  ap.space = MemSpace::psum;
  ap.buffer = bank.index;
  ap.dtype = DType::fp32;
  ap.partitions = partitions;
  ap.offset = offset;
  ap.num_free = 1;
  ap.free[0] = {cols, 1};
  return ap;
}

AccessPattern Emitter::broadcast_column(AccessPattern col, int64_t ncols) {
  col.num_free = 1;
  col.free[0] = {ncols, 0};
  return col;
}

AccessPattern Emitter::ids_ap(Slot ids, const Tiles& rows, int64_t t) {
  AccessPattern a;
  a.space = MemSpace::hbm;
  a.buffer = ids.index;
  a.dtype = DType::int32;
  a.partitions = rows.rows_in(t);
  a.partition_stride = 1;
  a.offset = rows.row0(t);
  return a;
}

// ---- DMA ----
void Emitter::copy_rows(bool load, AccessPattern dst, AccessPattern src, bool fine) {
  // A load of a value the plan writes waits for compute and is waited for (a KV cache after
  // its update): it is cut finer, over more engines, so that its latency is short.
  const bool dependent =
      load && src.space == MemSpace::hbm && m_builder.role(src.buffer) != isa::TensorRole::input;
  fine = fine || (load && m_fine_loads);
  const int64_t split =
      dependent || fine ? std::min(m_options.dma_dependent_split_bytes, m_options.dma_split_bytes)
                        : m_options.dma_split_bytes;
  const int64_t cols = dst.free[0].size;
  const int64_t bytes = int64_t(dst.partitions) * cols * isa::dtype_bytes(dst.dtype);
  const int64_t want =
      std::min<int64_t>(load ? m_queues.load_queue_count() : m_queues.store_queue_count(),
                        (bytes + split - 1) / split);
  int64_t pieces = want;
  const bool plain = dst.num_free == 1 && src.num_free == 1 && dst.free[0].stride == 1 &&
                     src.free[0].stride == 1 && src.scalar < 0 && dst.scalar < 0;
  if (!plain) pieces = 1;
  // Each piece's rows stay at least dma_min_chunk_bytes long (the DMA charges every chunk).
  const int64_t row_bytes = cols * isa::dtype_bytes(dst.dtype);
  pieces = std::min(pieces, row_bytes / std::max<int64_t>(1, m_options.dma_min_chunk_bytes));
  pieces = std::max<int64_t>(1, std::min(pieces, cols));
  // Rows too short to cut by columns are cut by rows (partitions) instead: the pieces' chunks
  // are the same, only their descriptors are more, and the transfer spreads over the queues.
  const int64_t row_pieces =
      plain ? std::max<int64_t>(1, std::min<int64_t>(want / pieces, dst.partitions)) : 1;
  const int64_t step = (cols + pieces - 1) / pieces;
  const int32_t rows = dst.partitions;
  auto rows_of = [](AccessPattern& ap, int32_t r0, int32_t n) {
    if (ap.space == MemSpace::hbm) {
      ap.offset += int64_t{r0} * ap.partition_stride;
    } else {
      ap.partition_start += r0;
    }
    ap.partitions = n;
  };
  for (int64_t p = 0; p < row_pieces; ++p) {
    const auto r0 = static_cast<int32_t>(rows * p / row_pieces);
    const auto r1 = static_cast<int32_t>(rows * (p + 1) / row_pieces);
    for (int64_t c0 = 0; c0 < cols; c0 += step) {
      AccessPattern d = dst, s = src;
      if (row_pieces > 1) {
        rows_of(d, r0, r1 - r0);
        rows_of(s, r0, r1 - r0);
      }
      d.offset += c0;
      s.offset += c0;
      d.free[0].size = s.free[0].size = std::min(step, cols - c0);
      dma(load ? next_load_queue() : next_store_queue(), d, s);
    }
  }
}

void Emitter::dma(int queue, const AccessPattern& dst, const AccessPattern& src) {
  Instruction in;
  in.op = Opcode::dma_copy;
  in.dst = dst;
  in.src[0] = src;
  emit(queue, in);
}

// ---- emit helpers ----
void Emitter::emit(int stream, Instruction in) {
  in.node = m_current_node;
  ++m_emitted;
  if (const Engine e = isa::info(in.op).engine; e == Engine::vector || e == Engine::scalar) {
    // In scalar-engine time: the vector engine's element-cycles weigh m_vector_cost_percent.
    m_lane_busy[e == Engine::vector ? 0 : 1] +=
        lane_cost(in) * (e == Engine::vector ? m_vector_cost_percent : 100);
  }
  if (m_queues.is_queue(stream) && in.op != Opcode::dma_scatter && in.dst.space != MemSpace::hbm) {
    const bool input = in.src[0].space == MemSpace::hbm &&
                       m_builder.role(in.src[0].buffer) == isa::TensorRole::input;
    stream = m_queues.place_load(stream, input, m_current_node, m_position);
  }
  if (m_queues.is_queue(stream) && stream != m_cc_queue) {  // a collective moves no DMA bytes
    const int64_t bytes = in.op == Opcode::dma_scatter ? in.src[0].bytes() : in.dst.bytes();
    m_queues.record(stream, bytes, m_current_node);
  }
  m_builder.emit(stream, std::move(in));
}

Instruction Emitter::vec(Opcode op, const AccessPattern& dst) {
  Instruction in;
  in.op = op;
  in.dst = dst;
  return in;
}

void Emitter::tensor_tensor(AluOp alu, const AccessPattern& dst, const AccessPattern& a,
                            const AccessPattern& b) {
  Instruction in = vec(Opcode::tensor_tensor, dst);
  in.alu = alu;
  in.src[0] = a;
  in.src[1] = b;
  emit(stream(Engine::vector), in);
}

void Emitter::tensor_scalar(AluOp alu, const AccessPattern& dst, const AccessPattern& a, double s,
                            bool reverse) {
  Instruction in = vec(Opcode::tensor_scalar, dst);
  in.alu = alu;
  in.src[0] = a;
  in.scalar.imm = s;
  in.reverse = reverse;
  emit(stream(Engine::vector), in);
}

void Emitter::reduce(AluOp alu, const AccessPattern& dst, const AccessPattern& src) {
  Instruction in = vec(Opcode::tensor_reduce, dst);
  in.alu = alu;
  in.src[0] = src;
  emit(stream(Engine::vector), in);
}

void Emitter::activation(ActFn fn, const AccessPattern& dst, const AccessPattern& src, double scale,
                         double bias, const AccessPattern* accum) {
  Instruction in = vec(accum ? Opcode::activation_reduce : Opcode::activation, dst);
  in.act = fn;
  in.src[0] = src;
  in.scale = scale;
  in.bias = bias;
  if (accum) in.accum = *accum;
  emit(stream(Engine::scalar), in);
}

// The modelled occupancy of a vector or scalar instruction, in element-cycles: the lane
// engines' model (a fixed overhead plus one cycle per element per input, engines/src/
// lane_timing.cpp) at one element per cycle and the chip's overhead (lane_overhead). Only the
// comparison of the two engines' running sums matters; it is deterministic, not a timing.
int64_t Emitter::lane_cost(const Instruction& in) const {
  int inputs = 0;
  for (int i = 0; i < 3; ++i) inputs += (isa::info(in.op).fields & (isa::F_Src0 << i)) ? 1 : 0;
  const int64_t elements =
      in.op == Opcode::tensor_reduce ? in.src[0].free_elements() : in.dst.free_elements();
  return m_lane_overhead + std::max(1, inputs) * elements;
}

int64_t Emitter::lane_overhead(const isa::CostHints& costs) {
  return std::llround(double(costs.vector_fixed_ns) * costs.vector_elements_per_ns);
}

int64_t Emitter::vector_cost_percent(const isa::CostHints& costs) {
  if (costs.vector_elements_per_ns <= 0 || costs.scalar_elements_per_ns <= 0) return 100;
  return std::max<int64_t>(
      1, std::llround(100.0 * costs.scalar_elements_per_ns / costs.vector_elements_per_ns));
}

void Emitter::evacuate(const AccessPattern& dst, const AccessPattern& psum,
                       const AccessPattern* add) {
  if (add) {  // only the vector engine adds a tensor on the way out (activation: immediates)
    tensor_tensor(AluOp::add, dst, psum, *add);
    return;
  }
  if (m_lane_busy[0] <= m_lane_busy[1]) {
    Instruction copy = vec(Opcode::tensor_copy, dst);
    copy.src[0] = psum;
    emit(stream(Engine::vector), copy);
  } else {
    activation(ActFn::identity, dst, psum);
  }
}

void Emitter::emit_transpose(const AccessPattern& dst, const AccessPattern& src) {
  Instruction tr;
  tr.op = Opcode::transpose;
  tr.dst = dst;
  tr.src[0] = src;
  emit(stream(Engine::tensor), tr);
}

void Emitter::emit_matmul(const AccessPattern& dst, const AccessPattern& stationary,
                          const AccessPattern& moving, bool start, bool stop) {
  Instruction mm;
  mm.op = Opcode::matmul;
  mm.dst = dst;
  mm.src[0] = stationary;
  mm.src[1] = moving;
  mm.start = start;
  mm.stop = stop;
  emit(stream(Engine::tensor), mm);
}

}  // namespace wallsim::compiler_stub::lowering
