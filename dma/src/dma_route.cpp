// A DMA descriptor's route, resource weights, chunks and latency (plain C++, no SystemC).
#include "wallsim/dma/dma_route.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace wallsim::dma {

using isa::AccessPattern;
using isa::MemSpace;
using isa::Opcode;

namespace {

std::string space_name(MemSpace s) { return std::string(isa::name_of(s)); }

bool off_chip(MemSpace s) { return s == MemSpace::hbm || s == MemSpace::host; }

// Pieces when the elements of `n` move in iteration order and `a` breaks every `la` elements,
// `b` every `lb`: the union of both sides' break points.
int64_t merged_chunks(int64_t n, int64_t la, int64_t lb) {
  if (n <= 0) return 0;
  const int64_t g = std::gcd(la, lb);
  const int64_t both = (la / g > n / lb) ? 0 : n / (la / g * lb);
  return std::max<int64_t>(1, (n + la - 1) / la + (n + lb - 1) / lb - both);
}

}  // namespace

std::string DescriptorCost::route() const {
  std::string r = op == Opcode::dma_gather    ? "gather "
                  : op == Opcode::dma_scatter ? "scatter "
                                              : "";
  r += space_name(src) + "->" + space_name(dst);
  if (hardware_transpose) r += " (dma transpose)";
  return r;
}

int64_t contiguous_elements(const AccessPattern& ap) {
  int64_t run = 1;
  int d = ap.num_free - 1;
  for (; d >= 0; --d) {
    const isa::Dim& dim = ap.free[d];
    if (dim.size == 1) continue;
    if (dim.stride != run) break;
    run *= dim.size;
  }
  if (d < 0 && off_chip(ap.space) && ap.partitions > 1 && ap.partition_stride == run) {
    run *= ap.partitions;
  }
  return std::max<int64_t>(1, run);
}

DescriptorCost descriptor_cost(const isa::Instruction& in, const DmaTiming& dma,
                               const memory::HbmTiming& hbm, const HostLinkTiming& link) {
  DescriptorCost c;
  c.op = in.op;
  c.src = in.src[0].space;
  c.dst = in.dst.space;
  const AccessPattern& src = in.src[0];
  const AccessPattern& dst = in.dst;
  const int64_t elements = dst.elements();
  switch (in.op) {
    case Opcode::dma_copy: {
      c.bytes = dst.bytes();
      const int64_t ls = contiguous_elements(src), ld = contiguous_elements(dst);
      c.chunks = merged_chunks(elements, ls, ld);
      // A transpose of 2-byte elements: one side contiguous, the other element by element.
      c.transpose = isa::dtype_bytes(dst.dtype) == 2 && c.chunks == elements && elements > 1 &&
                    (ls > 1 || ld > 1);
      if (c.transpose && dma.transpose_chunk_bytes > 0) {
        c.hardware_transpose = true;
        c.chunks = (c.bytes + dma.transpose_chunk_bytes - 1) / dma.transpose_chunk_bytes;
      }
      break;
    }
    case Opcode::dma_gather:
    case Opcode::dma_scatter: {
      const bool gather = in.op == Opcode::dma_gather;
      const AccessPattern& rows = gather ? dst : src;  // the on-chip side, one row a partition
      c.bytes = rows.bytes();
      // Every gathered or scattered row is a piece of its own on the indexed side.
      const int64_t row = std::max<int64_t>(1, rows.free_elements());
      c.chunks = merged_chunks(rows.elements(), std::min(row, contiguous_elements(rows)), row);
      c.index_bytes = in.src[1].bytes();
      break;
    }
    default:
      throw std::invalid_argument("descriptor_cost: " + std::string(isa::info(in.op).name) +
                                  " is not a DMA instruction");
  }
  const double bytes = std::max<double>(1.0, double(c.bytes));
  c.engine_weight =
      1.0 + (double(c.chunks) * double(dma.chunk_overhead_bytes) + double(c.index_bytes)) / bytes;
  const MemSpace index_space = in.op == Opcode::dma_copy ? MemSpace::sbuf : in.src[1].space;
  const bool reads_hbm = src.space == MemSpace::hbm, writes_hbm = dst.space == MemSpace::hbm;
  const bool index_hbm = c.index_bytes > 0 && index_space == MemSpace::hbm;
  c.hbm_read_bytes = (reads_hbm ? c.bytes : 0) + (index_hbm ? c.index_bytes : 0);
  c.hbm_write_bytes = writes_hbm ? c.bytes : 0;
  c.hbm_weight = double(c.hbm_read_bytes + c.hbm_write_bytes) / bytes;
  const int host_ends = (src.space == MemSpace::host) + (dst.space == MemSpace::host);
  c.link_bytes = host_ends * c.bytes;
  c.link_weight = double(host_ends);
  if (reads_hbm || writes_hbm || index_hbm) c.latency_ns += hbm.latency_ns;
  if (host_ends > 0) c.latency_ns += link.latency_ns;
  return c;
}

}  // namespace wallsim::dma
