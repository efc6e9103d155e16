// Tests of what each DMA route costs: resources and weights, chunks, the transpose route.
#include "wallsim/dma/dma_route.h"

#include <stdexcept>

#include <gtest/gtest.h>

namespace wallsim::dma {
namespace {

using isa::AccessPattern;
using isa::DType;
using isa::Instruction;
using isa::MemSpace;
using isa::Opcode;

// [rows x cols] of `dtype`: on chip one row per partition, off chip rows `row_stride` apart.
AccessPattern rows(MemSpace space, int32_t n, int64_t cols, DType dtype = DType::bf16,
                   int64_t row_stride = -1, int64_t col_stride = 1) {
  AccessPattern ap;
  ap.space = space;
  ap.buffer = 0;
  ap.dtype = dtype;
  ap.partitions = n;
  ap.partition_stride =
      space == MemSpace::hbm || space == MemSpace::host ? (row_stride < 0 ? cols : row_stride) : 0;
  ap.num_free = 1;
  ap.free[0] = {cols, col_stride};
  return ap;
}

Instruction copy(AccessPattern dst, AccessPattern src) {
  Instruction in;
  in.op = Opcode::dma_copy;
  in.dst = dst;
  in.src[0] = src;
  return in;
}

DescriptorCost cost(const Instruction& in, DmaTiming dma = {}) {
  return descriptor_cost(in, dma, memory::HbmTiming{}, HostLinkTiming{});
}

TEST(DmaRoute, HbmToSbufUsesEngineAndHbmOnce) {
  const auto c = cost(copy(rows(MemSpace::sbuf, 128, 4096), rows(MemSpace::hbm, 128, 4096)));
  EXPECT_EQ(c.route(), "hbm->sbuf");
  EXPECT_EQ(c.bytes, 1 << 20);
  EXPECT_EQ(c.chunks, 128);  // one per partition: the HBM side is one run
  EXPECT_DOUBLE_EQ(c.engine_weight, 1.0 + 128.0 * 512 / (1 << 20));
  EXPECT_DOUBLE_EQ(c.hbm_weight, 1.0);
  EXPECT_DOUBLE_EQ(c.link_weight, 0.0);
  EXPECT_EQ(c.hbm_read_bytes, 1 << 20);
  EXPECT_EQ(c.latency_ns, memory::HbmTiming{}.latency_ns);
}

TEST(DmaRoute, SbufToHbmWritesHbm) {
  const auto c = cost(copy(rows(MemSpace::hbm, 128, 512), rows(MemSpace::sbuf, 128, 512)));
  EXPECT_EQ(c.hbm_write_bytes, 128 * 512 * 2);
  EXPECT_EQ(c.hbm_read_bytes, 0);
  EXPECT_DOUBLE_EQ(c.hbm_weight, 1.0);
}

TEST(DmaRoute, SbufToSbufUsesOnlyTheEngine) {
  const auto c = cost(copy(rows(MemSpace::sbuf, 128, 512), rows(MemSpace::sbuf, 128, 512)));
  EXPECT_EQ(c.route(), "sbuf->sbuf");
  EXPECT_DOUBLE_EQ(c.hbm_weight, 0.0);
  EXPECT_DOUBLE_EQ(c.link_weight, 0.0);
  EXPECT_EQ(c.latency_ns, 0);
}

TEST(DmaRoute, HostToHbmUsesLinkAndHbm) {
  const auto c = cost(copy(rows(MemSpace::hbm, 64, 1024), rows(MemSpace::host, 64, 1024)));
  EXPECT_EQ(c.route(), "host->hbm");
  EXPECT_EQ(c.chunks, 1);  // both sides one run
  EXPECT_DOUBLE_EQ(c.link_weight, 1.0);
  EXPECT_DOUBLE_EQ(c.hbm_weight, 1.0);
  EXPECT_EQ(c.link_bytes, 64 * 1024 * 2);
  EXPECT_EQ(c.latency_ns, memory::HbmTiming{}.latency_ns + HostLinkTiming{}.latency_ns);
}

TEST(DmaRoute, HbmToHbmReadsAndWritesHbm) {
  const auto c = cost(copy(rows(MemSpace::hbm, 128, 8192), rows(MemSpace::hbm, 128, 8192)));
  EXPECT_EQ(c.route(), "hbm->hbm");
  EXPECT_DOUBLE_EQ(c.hbm_weight, 2.0);
  EXPECT_EQ(c.hbm_read_bytes, c.bytes);
  EXPECT_EQ(c.hbm_write_bytes, c.bytes);
}

TEST(DmaRoute, GatherReadsTheIndexToo) {
  Instruction in;
  in.op = Opcode::dma_gather;
  in.dst = rows(MemSpace::sbuf, 128, 256);
  in.src[0] = rows(MemSpace::hbm, 1000, 256);
  in.src[1] = rows(MemSpace::hbm, 128, 1, DType::int32);
  const auto c = cost(in);
  EXPECT_EQ(c.route(), "gather hbm->sbuf");
  EXPECT_EQ(c.bytes, 128 * 256 * 2);
  EXPECT_EQ(c.index_bytes, 128 * 4);
  EXPECT_EQ(c.chunks, 128);  // a row each
  EXPECT_EQ(c.hbm_read_bytes, c.bytes + c.index_bytes);
  EXPECT_DOUBLE_EQ(c.hbm_weight, double(c.bytes + c.index_bytes) / double(c.bytes));
  EXPECT_DOUBLE_EQ(c.engine_weight, 1.0 + (128.0 * 512 + 128 * 4) / double(c.bytes));
}

TEST(DmaRoute, ScatterWritesRowsAndReadsTheIndex) {
  Instruction in;
  in.op = Opcode::dma_scatter;
  in.dst = rows(MemSpace::hbm, 1000, 256);
  in.src[0] = rows(MemSpace::sbuf, 128, 256);
  in.src[1] = rows(MemSpace::sbuf, 128, 1, DType::int32);
  const auto c = cost(in);
  EXPECT_EQ(c.route(), "scatter sbuf->hbm");
  EXPECT_EQ(c.hbm_write_bytes, c.bytes);
  EXPECT_EQ(c.hbm_read_bytes, 0);  // the index is in SBUF
  EXPECT_DOUBLE_EQ(c.hbm_weight, 1.0);
  EXPECT_GT(c.engine_weight, 1.0 + 128.0 * 512 / double(c.bytes));  // index read on the engine
}

// A [128 x 4096] bf16 tile read from HBM transposed: the HBM side strides by 128 elements.
Instruction transposed_load() {
  return copy(rows(MemSpace::sbuf, 128, 4096), rows(MemSpace::hbm, 128, 4096, DType::bf16, 1, 128));
}

TEST(DmaRoute, SmallChunksCostTheirOverhead) {
  DmaTiming strided;
  strided.transpose_chunk_bytes = 0;  // no hardware transpose (trn1)
  const auto c = cost(transposed_load(), strided);
  EXPECT_TRUE(c.transpose);
  EXPECT_FALSE(c.hardware_transpose);
  EXPECT_EQ(c.chunks, 128 * 4096);  // element by element
  EXPECT_DOUBLE_EQ(c.engine_weight, 1.0 + 512.0 / 2);
}

TEST(DmaRoute, HardwareTransposeIsItsOwnCheaperRoute) {
  DmaTiming trn2;
  trn2.transpose_chunk_bytes = 256;
  const auto hw = cost(transposed_load(), trn2);
  DmaTiming none;
  none.transpose_chunk_bytes = 0;
  const auto strided = cost(transposed_load(), none);
  EXPECT_TRUE(hw.hardware_transpose);
  EXPECT_EQ(hw.route(), "hbm->sbuf (dma transpose)");
  EXPECT_EQ(hw.chunks, (1 << 20) / 256);
  EXPECT_DOUBLE_EQ(hw.engine_weight, 1.0 + 512.0 / 256);
  EXPECT_LT(hw.engine_weight, strided.engine_weight);
}

TEST(DmaRoute, FourByteStridedCopiesAreNotTransposes) {
  const auto c = cost(copy(rows(MemSpace::sbuf, 128, 1024, DType::fp32),
                           rows(MemSpace::hbm, 128, 1024, DType::fp32, 1, 128)));
  EXPECT_FALSE(c.transpose);
  EXPECT_EQ(c.chunks, 128 * 1024);
}

TEST(DmaRoute, ContiguousRunsMergeDimensionsAndRows) {
  AccessPattern ap = rows(MemSpace::hbm, 4, 64);
  ap.num_free = 2;
  ap.free[0] = {2, 32};
  ap.free[1] = {32, 1};
  EXPECT_EQ(contiguous_elements(ap), 4 * 64);
  ap.partition_stride = 100;  // gaps between rows
  EXPECT_EQ(contiguous_elements(ap), 64);
  EXPECT_EQ(contiguous_elements(rows(MemSpace::sbuf, 128, 64)), 64);  // partitions are apart
}

TEST(DmaRoute, RejectsComputeInstructions) {
  Instruction in;
  in.op = Opcode::matmul;
  EXPECT_THROW(cost(in), std::invalid_argument);
}

}  // namespace
}  // namespace wallsim::dma
