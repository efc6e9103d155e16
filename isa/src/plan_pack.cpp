// Packing plans: per instruction, a presence mask, then only the present fields, integers as
// zigzag LEB128 varints and doubles as their 8 bytes.
#include "wallsim/isa/plan_pack.h"

#include <cstring>
#include <stdexcept>

namespace wallsim::isa {
namespace {

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : m_out(out) {}
  void u(uint64_t v) {
    while (v >= 0x80) {
      m_out.push_back(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    m_out.push_back(static_cast<uint8_t>(v));
  }
  void i(int64_t v) { u((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }
  void byte(uint8_t v) { m_out.push_back(v); }
  void f(double v) {
    uint8_t b[8];
    std::memcpy(b, &v, 8);
    m_out.insert(m_out.end(), b, b + 8);
  }

 private:
  std::vector<uint8_t>& m_out;
};

class Reader {
 public:
  Reader(const uint8_t* p, const uint8_t* end) : m_p(p), m_end(end) {}
  uint64_t u() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      const uint8_t b = next();
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
  }
  int64_t i() {
    const uint64_t z = u();
    return static_cast<int64_t>((z >> 1) ^ (~(z & 1) + 1));
  }
  uint8_t byte() { return next(); }
  double f() {
    if (m_end - m_p < 8) throw std::logic_error("PackedPlan: truncated");
    double v;
    std::memcpy(&v, m_p, 8);
    m_p += 8;
    return v;
  }

 private:
  uint8_t next() {
    if (m_p == m_end) throw std::logic_error("PackedPlan: truncated");
    return *m_p++;
  }
  const uint8_t* m_p;
  const uint8_t* m_end;
};

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Every field, so that unused free dims round-trip too.
void put(Writer& w, const AccessPattern& ap) {
  w.i(ap.partition_stride);
  w.i(ap.offset);
  w.i(ap.scalar_stride);
  w.i(ap.buffer);
  w.i(ap.partition_start);
  w.i(ap.partitions);
  w.i(ap.scalar);
  w.byte(static_cast<uint8_t>(ap.space));
  w.byte(static_cast<uint8_t>(ap.dtype));
  w.byte(ap.num_free);
  // Free dims to write: through the last one that is used or not the default {1, 1}.
  const Dim dflt{};
  int nd = 0;
  for (int d = 0; d < kMaxFreeDims; ++d) {
    if (d < ap.num_free || !(ap.free[d] == dflt)) nd = d + 1;
  }
  w.byte(static_cast<uint8_t>(nd));
  for (int d = 0; d < nd; ++d) {
    w.i(ap.free[d].size);
    w.i(ap.free[d].stride);
  }
}

AccessPattern get_ap(Reader& r) {
  AccessPattern ap;
  ap.partition_stride = r.i();
  ap.offset = r.i();
  ap.scalar_stride = r.i();
  ap.buffer = static_cast<int32_t>(r.i());
  ap.partition_start = static_cast<int32_t>(r.i());
  ap.partitions = static_cast<int32_t>(r.i());
  ap.scalar = static_cast<int32_t>(r.i());
  ap.space = static_cast<MemSpace>(r.byte());
  ap.dtype = static_cast<DType>(r.byte());
  ap.num_free = r.byte();
  const int nd = r.byte();
  for (int d = 0; d < nd && d < kMaxFreeDims; ++d) {
    ap.free[d].size = r.i();
    ap.free[d].stride = r.i();
  }
  return ap;
}

bool same_ap(const AccessPattern& a, const AccessPattern& b) {
  if (!(a == b)) return false;
  for (int d = a.num_free; d < kMaxFreeDims; ++d) {
    if (!(a.free[d] == b.free[d])) return false;
  }
  return true;
}

enum : uint32_t {
  kDst = 1u << 0,  // then src 0..2 (bits 1..3) and accum (bit 4)
  kAccum = 1u << 4,
  kScale = 1u << 5,
  kBias = 1u << 6,
  kValue = 1u << 7,
  kPartitionStep = 1u << 8,
  kStep = 1u << 9,
  kScalar = 1u << 10,
  kWaits = 1u << 11,
  kSignals = 1u << 12,
  kComm = 1u << 13,  // comm and peer
};

void put(Writer& w, const Instruction& in) {
  static const Instruction dflt{};
  uint32_t mask = 0;
  if (!same_ap(in.dst, dflt.dst)) mask |= kDst;
  for (int k = 0; k < 3; ++k) {
    if (!same_ap(in.src[k], dflt.src[k])) mask |= kDst << (k + 1);
  }
  if (!same_ap(in.accum, dflt.accum)) mask |= kAccum;
  if (!same_bits(in.scale, dflt.scale)) mask |= kScale;
  if (!same_bits(in.bias, dflt.bias)) mask |= kBias;
  if (!same_bits(in.value, dflt.value)) mask |= kValue;
  if (!same_bits(in.partition_step, dflt.partition_step)) mask |= kPartitionStep;
  if (!same_bits(in.step, dflt.step)) mask |= kStep;
  if (in.scalar.scalar != dflt.scalar.scalar || !same_bits(in.scalar.imm, dflt.scalar.imm))
    mask |= kScalar;
  if (!in.waits.empty()) mask |= kWaits;
  if (!in.signals.empty()) mask |= kSignals;
  if (in.comm != dflt.comm || in.peer != dflt.peer) mask |= kComm;
  w.u(mask);
  w.byte(static_cast<uint8_t>(in.op));
  w.byte(static_cast<uint8_t>(in.alu));
  w.byte(static_cast<uint8_t>(in.act));
  w.byte(static_cast<uint8_t>(in.reverse | in.start << 1 | in.stop << 2));
  w.i(in.node);
  if (mask & kDst) put(w, in.dst);
  for (int k = 0; k < 3; ++k) {
    if (mask & (kDst << (k + 1))) put(w, in.src[k]);
  }
  if (mask & kAccum) put(w, in.accum);
  if (mask & kScale) w.f(in.scale);
  if (mask & kBias) w.f(in.bias);
  if (mask & kValue) w.f(in.value);
  if (mask & kPartitionStep) w.f(in.partition_step);
  if (mask & kStep) w.f(in.step);
  if (mask & kScalar) {
    w.i(in.scalar.scalar);
    w.f(in.scalar.imm);
  }
  if (mask & kWaits) {
    w.u(in.waits.size());
    for (const SemWait& x : in.waits) {
      w.i(x.sem);
      w.i(x.value);
    }
  }
  if (mask & kSignals) {
    w.u(in.signals.size());
    for (const SemSignal& x : in.signals) {
      w.i(x.sem);
      w.i(x.add);
    }
  }
  if (mask & kComm) {
    w.i(in.comm);
    w.i(in.peer);
  }
}

Instruction get_instruction(Reader& r) {
  Instruction in;
  const uint64_t mask = r.u();
  in.op = static_cast<Opcode>(r.byte());
  in.alu = static_cast<AluOp>(r.byte());
  in.act = static_cast<ActFn>(r.byte());
  const uint8_t flags = r.byte();
  in.reverse = flags & 1;
  in.start = flags & 2;
  in.stop = flags & 4;
  in.node = static_cast<int32_t>(r.i());
  if (mask & kDst) in.dst = get_ap(r);
  for (int k = 0; k < 3; ++k) {
    if (mask & (kDst << (k + 1))) in.src[k] = get_ap(r);
  }
  if (mask & kAccum) in.accum = get_ap(r);
  if (mask & kScale) in.scale = r.f();
  if (mask & kBias) in.bias = r.f();
  if (mask & kValue) in.value = r.f();
  if (mask & kPartitionStep) in.partition_step = r.f();
  if (mask & kStep) in.step = r.f();
  if (mask & kScalar) {
    in.scalar.scalar = static_cast<int32_t>(r.i());
    in.scalar.imm = r.f();
  }
  if (mask & kWaits) {
    in.waits.resize(r.u());
    for (SemWait& x : in.waits) {
      x.sem = static_cast<int32_t>(r.i());
      x.value = r.i();
    }
  }
  if (mask & kSignals) {
    in.signals.resize(r.u());
    for (SemSignal& x : in.signals) {
      x.sem = static_cast<int32_t>(r.i());
      x.add = r.i();
    }
  }
  if (mask & kComm) {
    in.comm = static_cast<int16_t>(r.i());
    in.peer = static_cast<int16_t>(r.i());
  }
  return in;
}

}  // namespace

PackedPlan::PackedPlan(const Plan& plan) {
  m_decls.name = plan.name;
  m_decls.scalars = plan.scalars;
  m_decls.comms = plan.comms;
  m_decls.semaphores = plan.semaphores;
  m_decls.tensors = plan.tensors;
  m_decls.buffers = plan.buffers;
  m_decls.nodes = plan.nodes;
  Writer w(m_bytes);
  for (const Stream& s : plan.streams) {
    m_decls.streams.push_back({s.engine, s.name, s.dma_engine, {}});
    m_counts.push_back(static_cast<int64_t>(s.instructions.size()));
    for (const Instruction& in : s.instructions) put(w, in);
    m_instructions += static_cast<int64_t>(s.instructions.size());
  }
  m_bytes.shrink_to_fit();
}

Plan PackedPlan::unpack() const {
  Plan p = m_decls;
  Reader r(m_bytes.data(), m_bytes.data() + m_bytes.size());
  for (size_t s = 0; s < p.streams.size(); ++s) {
    auto& instrs = p.streams[s].instructions;
    instrs.reserve(static_cast<size_t>(m_counts[s]));
    for (int64_t k = 0; k < m_counts[s]; ++k) instrs.push_back(get_instruction(r));
  }
  return p;
}

int64_t PackedPlan::bytes() const {
  int64_t b = static_cast<int64_t>(sizeof(*this) + m_bytes.capacity() +
                                   m_counts.capacity() * sizeof(int64_t));
  b += static_cast<int64_t>(
      m_decls.buffers.size() * sizeof(BufferDecl) + m_decls.nodes.size() * sizeof(NodeInfo) +
      m_decls.tensors.size() * sizeof(TensorDecl) + m_decls.streams.size() * sizeof(Stream));
  return b;
}

}  // namespace wallsim::isa
