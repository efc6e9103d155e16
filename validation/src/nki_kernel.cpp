// NkiKernel: NKI statements as plan instructions (see nki_kernel.h for the lowering).
#include "wallsim/validation/nki_kernel.h"

#include <algorithm>
#include <stdexcept>

namespace wallsim::validation {

using isa::AccessPattern;
using isa::MemSpace;

namespace {

AccessPattern on_chip(const Tile& t, int32_t p0, int32_t parts) {
  AccessPattern ap;
  ap.buffer = t.slot.index;
  ap.space = t.slot.space;
  ap.dtype = t.dtype;
  ap.partition_start = p0;
  ap.partitions = parts;
  ap.offset = t.offset;
  ap.num_free = 1;
  ap.free[0] = {t.free, 1};
  return ap;
}
AccessPattern on_chip(const Tile& t) { return on_chip(t, 0, t.partitions); }

AccessPattern off_chip(const HbmTensor& h, int64_t row0, int32_t rows, int64_t col0, int64_t cols) {
  if (row0 < 0 || col0 < 0 || row0 + rows > h.rows || col0 + cols > h.cols) {
    throw std::invalid_argument("NkiKernel: an HBM access falls outside its tensor");
  }
  AccessPattern ap;
  ap.buffer = h.slot.index;
  ap.space = MemSpace::hbm;
  ap.dtype = h.dtype;
  ap.partitions = rows;
  ap.partition_stride = h.cols;
  ap.offset = row0 * h.cols + col0;
  ap.num_free = 1;
  ap.free[0] = {cols, 1};
  return ap;
}

}  // namespace

Tile Tile::columns(int64_t col, int64_t cols) const {
  if (col < 0 || col + cols > free) throw std::invalid_argument("Tile: columns out of range");
  Tile t = *this;
  t.offset += col;
  t.free = cols;
  return t;
}

NkiKernel::NkiKernel(std::string name, const isa::ArchSpec& arch)
    : m_arch(arch), m_builder(std::move(name)) {
  m_load_queues.assign(static_cast<size_t>(arch.dma.engines), -1);
  m_store_queues.assign(static_cast<size_t>(arch.dma.engines), -1);
}

HbmTensor NkiKernel::hbm_tensor(const std::string& name, isa::DType dtype, int64_t rows,
                                int64_t cols, isa::TensorRole role) {
  return {m_builder.add_tensor(name, MemSpace::hbm, dtype, {rows, cols}, role), dtype, rows, cols};
}

int64_t NkiKernel::free_bytes(MemSpace space) const {
  return m_arch.bytes_per_partition(space) - m_used[space == MemSpace::psum ? 1 : 0];
}

NkiKernel::TilePool NkiKernel::pool(const std::string& name, MemSpace space, isa::DType dtype,
                                    int32_t partitions, int64_t free, int buffers) {
  const bool psum = space == MemSpace::psum;
  int64_t bytes = free * isa::dtype_bytes(dtype);
  // A PSUM tile takes whole banks: accumulation groups live in one bank each.
  if (psum)
    bytes = (bytes + m_arch.psum.bank_bytes - 1) / m_arch.psum.bank_bytes * m_arch.psum.bank_bytes;
  if (buffers < 1 || partitions > m_arch.partitions(space) ||
      int64_t{buffers} * bytes > free_bytes(space)) {
    throw std::invalid_argument("NkiKernel: pool " + name + " (" + std::to_string(buffers) + " x " +
                                std::to_string(bytes) + " B per partition) does not fit in " +
                                std::string(isa::name_of(space)));
  }
  TilePool p;
  for (int b = 0; b < buffers; ++b) {
    Tile t;
    t.slot = m_builder.add_buffer(space, 0, partitions, m_used[psum], bytes, name);
    t.dtype = dtype;
    t.partitions = partitions;
    t.free = free;
    m_used[psum] += bytes;
    p.m_tiles.push_back(t);
  }
  return p;
}

Tile NkiKernel::TilePool::next() {
  const Tile t = m_tiles[m_next];
  m_next = (m_next + 1) % m_tiles.size();
  return t;
}

int NkiKernel::queue(bool is_load, int engine) {
  int& q = (is_load ? m_load_queues : m_store_queues)[static_cast<size_t>(engine)];
  if (q < 0) q = m_builder.add_queue((is_load ? "ld" : "st") + std::to_string(engine), engine);
  return q;
}

void NkiKernel::dma(bool is_load, const AccessPattern& sbuf, const AccessPattern& hbm) {
  const int engines = m_arch.dma.engines;
  const int32_t per = (sbuf.partitions + engines - 1) / engines;
  for (int e = 0; e * per < sbuf.partitions; ++e) {
    const int32_t p0 = e * per, n = std::min(per, sbuf.partitions - p0);
    AccessPattern s = sbuf, h = hbm;
    s.partition_start = sbuf.partition_start + p0;
    s.partitions = n;
    h.offset = hbm.offset + int64_t{p0} * hbm.partition_stride;
    h.partitions = n;
    isa::Instruction in;
    in.op = isa::Opcode::dma_copy;
    in.dst = is_load ? s : h;
    in.src[0] = is_load ? h : s;
    m_builder.emit(queue(is_load, e), in);
  }
}

void NkiKernel::load(const Tile& dst, const HbmTensor& src, int64_t row0, int64_t col0) {
  dma(true, on_chip(dst), off_chip(src, row0, dst.partitions, col0, dst.free));
}

void NkiKernel::store(const HbmTensor& dst, int64_t row0, int64_t col0, const Tile& src) {
  dma(false, on_chip(src), off_chip(dst, row0, src.partitions, col0, src.free));
}

void NkiKernel::matmul(const Tile& psum, const Tile& stationary, const Tile& moving, bool start,
                       bool stop) {
  isa::Instruction in;
  in.op = isa::Opcode::matmul;
  in.dst = on_chip(psum);
  in.src[0] = on_chip(stationary);
  in.src[1] = on_chip(moving);
  in.start = start;
  in.stop = stop;
  m_builder.emit(m_builder.stream(isa::Engine::tensor), in);
}

void NkiKernel::copy(const Tile& dst, const Tile& src) {
  isa::Instruction in;
  in.op = isa::Opcode::tensor_copy;
  in.dst = on_chip(dst);
  in.src[0] = on_chip(src);
  m_builder.emit(m_builder.stream(isa::Engine::vector), in);
}

void NkiKernel::add(const Tile& dst, const Tile& a, const Tile& b) {
  isa::Instruction in;
  in.op = isa::Opcode::tensor_tensor;
  in.alu = isa::AluOp::add;
  in.dst = on_chip(dst);
  in.src[0] = on_chip(a);
  in.src[1] = on_chip(b);
  m_builder.emit(m_builder.stream(isa::Engine::vector), in);
}

void NkiKernel::zero(const Tile& dst) {
  isa::Instruction in;
  in.op = isa::Opcode::memset;
  in.value = 0.0;
  in.dst = on_chip(dst);
  m_builder.emit(m_builder.stream(isa::Engine::vector), in);
}

isa::Plan NkiKernel::build() { return m_builder.build(); }

}  // namespace wallsim::validation
