// The plan verifier: declarations, operands, shapes, dtypes, bounds and static deadlocks.
#include "wallsim/isa/verifier.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

namespace wallsim::isa {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

class Verifier {
 public:
  Verifier(const Plan& plan, const ArchSpec& arch, int plan_index, std::vector<Diagnostic>& out)
      : m_plan(plan), m_arch(arch), m_index(plan_index), m_out(out) {}

  void run() {
    check_declarations();
    for (const Stream& s : m_plan.streams) {
      for (size_t i = 0; i < s.instructions.size(); ++i) {
        m_stream = &s;
        m_instr = static_cast<int64_t>(i);
        check_instruction(s.instructions[i]);
      }
    }
    m_stream = nullptr;
    m_instr = -1;
    check_deadlock();
  }

 private:
  void report(const std::string& rule, const std::string& message) {
    m_out.push_back({m_index, m_plan.name, m_stream ? m_stream->name : "", m_instr, rule, message});
  }

  // ---- declarations ----
  void check_declarations() {
    for (const BufferDecl& b : m_plan.buffers) {
      int32_t parts = m_arch.partitions(b.space);
      if (int64_t{b.partition_start} + b.partitions > parts) {
        report("decl", "buffer " + b.name + " covers partitions " + str(b.partition_start) + ".." +
                           str(int64_t{b.partition_start} + b.partitions) + " but " +
                           std::string(name_of(b.space)) + " has " + str(parts));
      }
      int64_t cap = m_arch.bytes_per_partition(b.space);
      if (b.offset_bytes + b.bytes > cap) {
        report("decl", "buffer " + b.name + " spans bytes " + str(b.offset_bytes) + ".." +
                           str(b.offset_bytes + b.bytes) + " of a partition but " +
                           std::string(name_of(b.space)) + " has " + str(cap));
      }
    }
    const int64_t hbm_bytes = m_plan.hbm_bytes();
    if (hbm_bytes > m_arch.hbm.bytes) {
      report("decl", "tensors need " + str(hbm_bytes) + " bytes of HBM but the device has " +
                         str(m_arch.hbm.bytes));
    }
    for (const NodeInfo& n : m_plan.nodes) {
      if (!m_node_ids.insert(n.id).second)
        report("provenance", "node id " + str(n.id) + " declared twice");
    }
    std::set<Engine> compute;
    // Duplicate stream names: sorted views first (no allocation per stream); only a plan that
    // has one looks for which, in stream order.
    std::vector<std::string_view> sorted;
    sorted.reserve(m_plan.streams.size());
    for (const Stream& s : m_plan.streams) sorted.push_back(s.name);
    std::sort(sorted.begin(), sorted.end());
    const bool repeats = std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();
    std::set<std::string_view> names;
    int queues = 0;
    for (const Stream& s : m_plan.streams) {
      if (repeats && !names.insert(s.name).second) report("decl", "two streams named " + s.name);
      if (s.engine == Engine::dma) {
        ++queues;
        if (s.dma_engine < 0 || s.dma_engine >= m_arch.dma.engines) {
          report("decl", "queue " + s.name + " is served by DMA engine " + str(s.dma_engine) +
                             ", but the chip's DMA engines are 0.." + str(m_arch.dma.engines - 1));
        }
      } else if (!compute.insert(s.engine).second) {
        report("decl", "two streams for the " + std::string(name_of(s.engine)) + " engine");
      }
    }
    if (queues > m_arch.dma.queues_max()) {
      report("decl", str(queues) + " DMA queues but a plan may use " +
                         str(m_arch.dma.queues_max()) + " (arch.dma.engines x queues_per_engine)");
    }
  }

  // ---- instructions ----
  void check_instruction(const Instruction& in) {
    const OpcodeInfo& oi = info(in.op);
    if (oi.engine != m_stream->engine) {
      report("engine", std::string(oi.name) + " runs on the " + std::string(name_of(oi.engine)) +
                           " engine, not " + std::string(name_of(m_stream->engine)));
      return;  // the operand rules below are per engine
    }
    if (in.uses(F_Dst)) check_operand(in.dst, "dst", true);
    for (int k = 0; k < 3; ++k) {
      if (in.uses(static_cast<OpField>(F_Src0 << k)))
        check_operand(in.src[k], oi.src_roles[k], false);
    }
    if (in.uses(F_Accum)) check_operand(in.accum, "accum", true);
    if (in.uses(F_Scalar) && in.scalar.scalar >= static_cast<int>(m_plan.scalars.size())) {
      report("scalar", "unknown run-time scalar");
    }
    if (in.node >= 0 && !m_node_ids.count(in.node)) {
      report("provenance", "node " + str(in.node) + " is not declared in the plan's nodes");
    }
    for (const SemWait& w : in.waits) {
      if (w.sem < 0 || w.sem >= static_cast<int>(m_plan.semaphores.size()))
        report("semaphore", "unknown semaphore");
    }
    for (const SemSignal& s : in.signals) {
      if (s.sem < 0 || s.sem >= static_cast<int>(m_plan.semaphores.size()))
        report("semaphore", "unknown semaphore");
    }
    check_shapes(in);
  }

  // An operand's name in a message ("src0 x_3"), built only when a rule reports: an operand
  // that passes costs no string.
  struct What {
    std::string_view role, target;
    std::string str() const { return std::string(role) + " " + std::string(target); }
    friend std::string operator+(const What& w, const char* s) { return w.str() + s; }
    friend std::string operator+(std::string s, const What& w) { return s + w.str(); }
  };

  void check_operand(const AccessPattern& ap, std::string_view role, bool writes) {
    Engine engine = m_stream->engine;
    const What what{role, m_plan.target_name(ap)};
    bool ok = writes ? m_arch.may_write(engine, ap.space) : m_arch.may_read(engine, ap.space);
    if (!ok) {
      report("space", "the " + std::string(name_of(engine)) + " engine may not " +
                          (writes ? "write " : "read ") + std::string(name_of(ap.space)) + " (" +
                          what + ")");
    }
    if (writes && ap.has_aliasing()) report("shape", what + " writes some elements twice");
    if (ap.scalar >= 0 && (engine != Engine::dma || is_on_chip(ap.space))) {
      report("scalar", what + ": only off-chip DMA accesses take a run-time scalar offset");
    }
    if (ap.scalar >= static_cast<int>(m_plan.scalars.size()))
      report("scalar", what + ": unknown run-time scalar");
    if (engine != Engine::dma && is_on_chip(ap.space) &&
        ap.partition_start % m_arch.partition_alignment != 0) {
      report("alignment", what + " starts at partition " + str(ap.partition_start) +
                              ", not a multiple of " + str(m_arch.partition_alignment));
    }
    if ((engine == Engine::vector || engine == Engine::scalar)) {
      int64_t limit = engine == Engine::vector ? m_arch.vector.free_max : m_arch.scalar.free_max;
      if (ap.free_elements() > limit) {
        report("tile", what + " has " + str(ap.free_elements()) + " free elements; the " +
                           std::string(name_of(engine)) + " engine takes at most " + str(limit));
      }
    }
    check_bounds(ap, what);
  }

  void check_bounds(const AccessPattern& ap, const What& what) {
    auto span = ap.span();
    if (!span) {
      report("bounds", what + ": extent overflows");
      return;
    }
    int64_t lo = span->lo, hi = span->hi;
    if (ap.scalar >= 0 && ap.scalar < static_cast<int>(m_plan.scalars.size())) {
      const ScalarDecl& s = m_plan.scalars[ap.scalar];
      // Both factors are below 2^48 in magnitude (plan reader bounds), so products fit.
      int64_t a = s.min * ap.scalar_stride, b = s.max * ap.scalar_stride;
      lo += std::min(a, b);
      hi += std::max(a, b);
    }
    int64_t esize = dtype_bytes(ap.dtype);
    if (is_on_chip(ap.space)) {
      const BufferDecl& b = m_plan.buffers[ap.buffer];
      if (ap.partition_start < b.partition_start ||
          int64_t{ap.partition_start} + ap.partitions > int64_t{b.partition_start} + b.partitions) {
        report("bounds", what + " uses partitions " + str(ap.partition_start) + ".." +
                             str(int64_t{ap.partition_start} + ap.partitions) +
                             " outside the buffer's " + str(b.partition_start) + ".." +
                             str(int64_t{b.partition_start} + b.partitions));
      }
      if (lo < 0 || (hi + 1) * esize > b.bytes) {
        report("bounds", what + " touches bytes " + str(lo * esize) + ".." + str((hi + 1) * esize) +
                             " of a " + str(b.bytes) + "-byte buffer");
      }
    } else {
      const TensorDecl& t = m_plan.tensors[ap.buffer];
      if (ap.dtype != t.dtype) {
        report("dtype", what + " reads " + std::string(name_of(ap.dtype)) + " from a " +
                            std::string(name_of(t.dtype)) + " tensor");
        return;
      }
      if (lo < 0 || hi >= t.elements()) {
        report("bounds", what + " touches elements " + str(lo) + ".." + str(hi + 1) + " of " +
                             str(t.elements()));
      }
    }
  }

  void check_same_shape(const AccessPattern& a, const AccessPattern& b, std::string_view an,
                        std::string_view bn) {
    if (a.partitions != b.partitions || a.free_elements() != b.free_elements()) {
      report("shape", std::string(an) + " is [" + str(a.partitions) + " x " +
                          str(a.free_elements()) + "] but " + std::string(bn) + " is [" +
                          str(b.partitions) + " x " + str(b.free_elements()) + "]");
    }
  }

  void require_float(const AccessPattern& a, std::string_view role) {
    if (!is_float(a.dtype))
      report("dtype",
             std::string(role) + " must be a float type, not " + std::string(name_of(a.dtype)));
  }

  void check_shapes(const Instruction& in) {
    const auto& [s0, s1, s2] = in.src;
    const auto& roles = info(in.op).src_roles;
    const std::string_view r0 = roles[0], r1 = roles[1], r2 = roles[2];
    switch (in.op) {
      case Opcode::matmul: {
        int64_t k = s0.partitions, m = s0.free_elements(), n = s1.free_elements();
        if (s1.partitions != k)
          report("shape",
                 "stationary has K=" + str(k) + " partitions but moving has " + str(s1.partitions));
        if (k > m_arch.tensor.rows)
          report("tile",
                 "K=" + str(k) + " exceeds the array's " + str(m_arch.tensor.rows) + " rows");
        if (m > m_arch.tensor.cols)
          report("tile",
                 "M=" + str(m) + " exceeds the array's " + str(m_arch.tensor.cols) + " columns");
        if (n > m_arch.tensor.moving_free_max)
          report("tile",
                 "N=" + str(n) + " exceeds the moving limit " + str(m_arch.tensor.moving_free_max));
        if (in.dst.partitions != m || in.dst.free_elements() != n) {
          report("shape", "dst is [" + str(in.dst.partitions) + " x " +
                              str(in.dst.free_elements()) + "] but the product is [" + str(m) +
                              " x " + str(n) + "]");
        }
        if (s0.dtype != s1.dtype) report("dtype", "stationary and moving differ in dtype");
        require_float(s0, "stationary");
        if (in.dst.dtype != DType::fp32)
          report("dtype",
                 "matmul accumulates into fp32, not " + std::string(name_of(in.dst.dtype)));
        check_one_bank(in.dst);
        break;
      }
      case Opcode::transpose: {
        if (in.dst.partitions != s0.free_elements() || in.dst.free_elements() != s0.partitions) {
          report("shape", "dst [" + str(in.dst.partitions) + " x " + str(in.dst.free_elements()) +
                              "] is not the transpose of src [" + str(s0.partitions) + " x " +
                              str(s0.free_elements()) + "]");
        }
        if (s0.partitions > m_arch.tensor.rows)
          report("tile", "src has more partitions than the array has rows");
        if (s0.free_elements() > m_arch.tensor.cols)
          report("tile", "src free size exceeds the array's columns");
        require_float(s0, "src");
        require_float(in.dst, "dst");
        check_one_bank(in.dst);
        break;
      }
      case Opcode::tensor_tensor:
        check_same_shape(in.dst, s0, "dst", r0);
        check_same_shape(in.dst, s1, "dst", r1);
        break;
      case Opcode::tensor_scalar:
      case Opcode::tensor_copy:
        check_same_shape(in.dst, s0, "dst", r0);
        break;
      case Opcode::tensor_reduce: {
        if (!is_reduction(in.alu))
          report("alu", "tensor_reduce takes add, max or min, not " + std::string(name_of(in.alu)));
        int64_t inner = s0.num_free ? s0.free[s0.num_free - 1].size : 1;
        if (in.dst.partitions != s0.partitions ||
            in.dst.free_elements() * inner != s0.free_elements()) {
          report("shape", "dst [" + str(in.dst.partitions) + " x " + str(in.dst.free_elements()) +
                              "] is not src [" + str(s0.partitions) + " x " +
                              str(s0.free_elements()) + "] without its innermost dim of " +
                              str(inner));
        }
        break;
      }
      case Opcode::memset:
      case Opcode::iota:
        break;
      case Opcode::select:
        check_same_shape(in.dst, s0, "dst", r0);
        check_same_shape(in.dst, s1, "dst", r1);
        check_same_shape(in.dst, s2, "dst", r2);
        break;
      case Opcode::activation:
      case Opcode::activation_reduce:
        check_same_shape(in.dst, s0, "dst", r0);
        require_float(s0, "src");
        require_float(in.dst, "dst");
        if (in.op == Opcode::activation_reduce &&
            (in.accum.partitions != in.dst.partitions || in.accum.free_elements() != 1)) {
          report("shape", "accum must be [" + str(in.dst.partitions) + " x 1]");
        }
        break;
      case Opcode::dma_copy:
        if (in.dst.elements() != s0.elements()) {
          report("shape", "dst has " + str(in.dst.elements()) + " elements but src has " +
                              str(s0.elements()));
        }
        if (in.dst.dtype != s0.dtype)
          report("dtype", "DMA does not convert: src is " + std::string(name_of(s0.dtype)) +
                              ", dst " + std::string(name_of(in.dst.dtype)));
        break;
      case Opcode::all_reduce:
      case Opcode::all_gather:
      case Opcode::reduce_scatter:
      case Opcode::all_to_all:
      case Opcode::permute:
      case Opcode::send:
      case Opcode::recv:
        check_collective(in);
        break;
      case Opcode::dma_gather:
      case Opcode::dma_scatter: {
        bool gather = in.op == Opcode::dma_gather;
        const AccessPattern& table = gather ? s0 : in.dst;
        const AccessPattern& rows = gather ? in.dst : s0;
        const std::string rows_name = gather ? "dst" : "src";
        if (is_on_chip(table.space))
          report("space", "the indexed table must be off chip (hbm or host)");
        if (table.free_elements() != rows.free_elements()) {
          report("shape", "a table row has " + str(table.free_elements()) + " elements but " +
                              rows_name + " rows have " + str(rows.free_elements()));
        }
        if (s1.partitions != rows.partitions || s1.free_elements() != 1) {
          report("shape", "index must be [" + str(rows.partitions) + " x 1], one row number per " +
                              rows_name + " partition");
        }
        if (s1.dtype != DType::int32) report("dtype", "index must be int32");
        if (table.dtype != rows.dtype)
          report("dtype", "DMA does not convert: table and " + rows_name + " differ in dtype");
        break;
      }
    }
  }

  // A collective's operands are HBM tensors of one dtype whose element counts the op relates
  // through the communicator's size; send/recv name a peer rank.
  void check_collective(const Instruction& in) {
    if (in.comm < 0 || in.comm >= static_cast<int>(m_plan.comms.size())) {
      report("collective", "unknown communicator");
      return;
    }
    const CommDecl& c = m_plan.comms[static_cast<size_t>(in.comm)];
    const int64_t p = c.size;
    const bool has_dst = in.uses(F_Dst), has_src = in.uses(F_Src0);
    if (has_dst && in.dst.space != MemSpace::hbm) report("collective", "dst must be an HBM tensor");
    if (has_src && in.src[0].space != MemSpace::hbm)
      report("collective", "src must be an HBM tensor");
    if (has_dst && has_src && in.dst.dtype != in.src[0].dtype)
      report("dtype", "a collective does not convert: src is " +
                          std::string(name_of(in.src[0].dtype)) + ", dst " +
                          std::string(name_of(in.dst.dtype)));
    if (in.uses(F_Alu) && !is_reduction(in.alu))
      report("alu", std::string(info(in.op).name) + " takes add, max or min, not " +
                        std::string(name_of(in.alu)));
    const int64_t nd = has_dst ? in.dst.elements() : 0, ns = has_src ? in.src[0].elements() : 0;
    const std::string on = " on communicator " + c.name + " of " + str(p);
    switch (in.op) {
      case Opcode::all_gather:
        if (nd != ns * p)
          report("shape", "dst has " + str(nd) + " elements, not size x src = " + str(ns * p) + on);
        break;
      case Opcode::reduce_scatter:
        if (ns != nd * p)
          report("shape", "src has " + str(ns) + " elements, not size x dst = " + str(nd * p) + on);
        break;
      case Opcode::all_to_all:
        if (nd != ns || ns % p != 0)
          report("shape", "dst and src must have equal element counts divisible by the size (" +
                              str(nd) + ", " + str(ns) + on + ")");
        break;
      case Opcode::all_reduce:
      case Opcode::permute:
        if (nd != ns) report("shape", "dst has " + str(nd) + " elements but src has " + str(ns));
        break;
      default:
        break;
    }
    if ((in.op == Opcode::send || in.op == Opcode::recv) && (in.peer < 0 || in.peer >= p))
      report("collective",
             "peer " + str(in.peer) + " is not a rank of " + c.name + " (0.." + str(p - 1) + ")");
  }

  void check_one_bank(const AccessPattern& dst) {
    if (dst.space != MemSpace::psum || !dst.span()) return;
    const BufferDecl& b = m_plan.buffers[dst.buffer];
    int64_t esize = dtype_bytes(dst.dtype);
    int64_t first = b.offset_bytes + dst.span()->lo * esize;
    int64_t last = b.offset_bytes + (dst.span()->hi + 1) * esize - 1;
    if (first / m_arch.psum.bank_bytes != last / m_arch.psum.bank_bytes) {
      report("tile", "PSUM output spans bytes " + str(first) + ".." + str(last + 1) +
                         ", crossing a " + str(m_arch.psum.bank_bytes) + "-byte bank boundary");
    }
  }

  // Semaphores only grow and waits are thresholds, so running every stream as far as it can,
  // repeatedly, reaches the furthest point any execution order can: what stays blocked then
  // is blocked in every execution.
  void check_deadlock() {
    size_t n = m_plan.streams.size();
    std::vector<size_t> pos(n, 0);
    std::vector<int64_t> sem(m_plan.semaphores.size(), 0);
    auto ready = [&](const Instruction& in) {
      for (const SemWait& w : in.waits) {
        if (w.sem < 0 || w.sem >= static_cast<int>(sem.size()) || sem[w.sem] < w.value)
          return false;
      }
      return true;
    };
    bool progress = true;
    while (progress) {
      progress = false;
      for (size_t s = 0; s < n; ++s) {
        const auto& instrs = m_plan.streams[s].instructions;
        while (pos[s] < instrs.size() && ready(instrs[pos[s]])) {
          for (const SemSignal& g : instrs[pos[s]].signals) {
            // Saturates: signals past 2^63 cannot unblock more than INT64_MAX does.
            if (g.sem >= 0 && g.sem < static_cast<int>(sem.size()) &&
                __builtin_add_overflow(sem[g.sem], g.add, &sem[g.sem]))
              sem[g.sem] = g.add < 0 ? INT64_MIN : INT64_MAX;
          }
          ++pos[s];
          progress = true;
        }
      }
    }
    for (size_t s = 0; s < n; ++s) {
      const auto& instrs = m_plan.streams[s].instructions;
      if (pos[s] == instrs.size()) continue;
      m_stream = &m_plan.streams[s];
      m_instr = static_cast<int64_t>(pos[s]);
      for (const SemWait& w : instrs[pos[s]].waits) {
        if (w.sem < 0 || w.sem >= static_cast<int>(sem.size()) || sem[w.sem] >= w.value) continue;
        report("semaphore", "deadlock: waits for " + m_plan.semaphores[w.sem] + " >= " +
                                str(w.value) + " but it can reach at most " + str(sem[w.sem]));
      }
    }
    m_stream = nullptr;
    m_instr = -1;
  }

  const Plan& m_plan;
  const ArchSpec& m_arch;
  int m_index;
  std::vector<Diagnostic>& m_out;
  std::set<int32_t> m_node_ids;  // declared provenance nodes
  const Stream* m_stream = nullptr;
  int64_t m_instr = -1;
};

}  // namespace

std::string Diagnostic::to_string() const {
  std::string s = "plan '" + plan_name + "'";
  if (!stream.empty()) {
    s += " " + stream;
    if (instruction >= 0) s += "[" + std::to_string(instruction) + "]";
  }
  return s + ": [" + rule + "] " + message;
}

std::vector<Diagnostic> verify(const Plan& plan, const ArchSpec& arch, int plan_index) {
  std::vector<Diagnostic> out;
  Verifier(plan, arch, plan_index, out).run();
  return out;
}

namespace {

// Every rank of a communicator must issue the same collectives in the same order (op, bytes,
// dtype, reduction, peer): per core, the group collectives of its plans on each communicator
// name, in plan order, then stream and instruction order.
void check_collective_sequences(const PlanSequence& seq, std::vector<Diagnostic>& out) {
  struct Issue {
    Opcode op;
    int64_t bytes;
    DType dtype;
    AluOp alu;
    int32_t peer;
    size_t plan;
    bool operator==(const Issue& o) const {
      return op == o.op && bytes == o.bytes && dtype == o.dtype && alu == o.alu && peer == o.peer;
    }
  };
  auto describe = [](const Issue& i) {
    std::string s = std::string(info(i.op).name) + " of " + std::to_string(i.bytes) + " bytes " +
                    std::string(name_of(i.dtype));
    if (info(i.op).fields & F_Alu) s += " (" + std::string(name_of(i.alu)) + ")";
    if (info(i.op).fields & F_Peer) s += " peer " + std::to_string(i.peer);
    return s;
  };
  // comm name -> core -> its collectives; the first plan of each core that declares the name
  std::map<std::string, std::map<std::pair<int, int>, std::vector<Issue>>> by_comm;
  std::map<std::pair<std::string, std::pair<int, int>>, size_t> first_plan;
  for (size_t i = 0; i < seq.plans.size(); ++i) {
    const Plan& p = seq.plans[i];
    const auto core = i < seq.cores.size() ? seq.cores[i] : std::pair<int, int>{0, 0};
    for (const CommDecl& c : p.comms) {
      by_comm[c.name][core];
      first_plan.emplace(std::make_pair(c.name, core), i);
    }
    for (const Stream& s : p.streams) {
      for (const Instruction& in : s.instructions) {
        if (!is_collective(in.op) || in.op == Opcode::send || in.op == Opcode::recv) continue;
        if (in.comm < 0 || in.comm >= static_cast<int>(p.comms.size())) continue;
        const AccessPattern& ap = in.uses(F_Src0) ? in.src[0] : in.dst;
        by_comm[p.comms[in.comm].name][core].push_back(
            {in.op, ap.bytes(), ap.dtype, in.uses(F_Alu) ? in.alu : AluOp::add, in.peer, i});
      }
    }
  }
  auto core_name = [](const std::pair<int, int>& c) {
    return "[" + std::to_string(c.first) + ", " + std::to_string(c.second) + "]";
  };
  for (const auto& [name, cores] : by_comm) {
    if (cores.size() < 2) continue;
    const auto& [first_core, first] = *cores.begin();
    for (const auto& [core, issues] : cores) {
      const size_t n = std::max(first.size(), issues.size());
      for (size_t k = 0; k < n; ++k) {
        if (k < first.size() && k < issues.size() && first[k] == issues[k]) continue;
        const size_t plan = k < issues.size() ? issues[k].plan : first_plan.at({name, core});
        const std::string theirs = k < issues.size() ? describe(issues[k]) : "nothing";
        const std::string ours = k < first.size() ? describe(first[k]) : "nothing";
        out.push_back({static_cast<int>(plan), seq.plans[plan].name, "", -1, "collective",
                       "communicator " + name + " collective " + std::to_string(k) + ": core " +
                           core_name(core) + " issues " + theirs + ", core " +
                           core_name(first_core) + " " + ours});
        break;  // one finding per core: the rest follow from the first difference
      }
    }
  }
}

}  // namespace

std::vector<Diagnostic> verify(const PlanSequence& seq, const ArchSpec& arch) {
  std::vector<Diagnostic> out;
  std::map<std::string, const TensorDecl*> seen;
  for (size_t i = 0; i < seq.plans.size(); ++i) {
    const Plan& p = seq.plans[i];
    Verifier(p, arch, static_cast<int>(i), out).run();
    for (const TensorDecl& t : p.tensors) {
      if (t.role == TensorRole::scratch) continue;
      auto [it, fresh] = seen.emplace(t.name, &t);
      const TensorDecl& prev = *it->second;
      if (!fresh && (prev.space != t.space || prev.dtype != t.dtype || prev.shape != t.shape)) {
        out.push_back(
            {static_cast<int>(i), p.name, "", -1, "binding",
             "tensor " + t.name + " differs in space, dtype or shape from an earlier plan's"});
      }
    }
  }
  check_collective_sequences(seq, out);
  return out;
}

}  // namespace wallsim::isa
