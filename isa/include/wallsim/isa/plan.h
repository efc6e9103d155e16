// Plan: what the compiler emits and the chip runs — per-engine instruction streams, DMA queues,
// semaphores, run-time scalars, on-chip buffers, off-chip tensors bound by name, provenance.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "wallsim/isa/instruction.h"
#include "wallsim/isa/types.h"

namespace wallsim::isa {

// A named integer bound when the plan is launched (a sequence length, a KV write position).
struct ScalarDecl {
  std::string name;
  int64_t min = 0;
  int64_t max = 0;
  bool operator==(const ScalarDecl& o) const {
    return name == o.name && min == o.min && max == o.max;
  }
};

// A communicator: `size` ranks that run collectives together. The plan names it; which (chip,
// core) each rank is, is bound at launch, so one plan serves every rank (SPMD).
struct CommDecl {
  std::string name;
  int64_t size = 1;
  bool operator==(const CommDecl& o) const { return name == o.name && size == o.size; }
};

enum class TensorRole : uint8_t { input, output, inout, scratch };
std::string_view name_of(TensorRole r);
std::optional<TensorRole> parse_tensor_role(std::string_view s);

// An off-chip tensor (HBM or host memory), row-major. Inputs and outputs are bound by name at
// launch; in a plan sequence, a tensor passes from one plan to the next by name.
struct TensorDecl {
  std::string name;
  MemSpace space = MemSpace::hbm;
  DType dtype = DType::fp32;
  std::vector<int64_t> shape;
  TensorRole role = TensorRole::scratch;
  int64_t elements() const;  // INT64_MAX on overflow
  bool operator==(const TensorDecl& o) const {
    return name == o.name && space == o.space && dtype == o.dtype && shape == o.shape &&
           role == o.role;
  }
};

// A region of SBUF or PSUM allocated by the compiler: a partition range and a byte range that
// is the same in every partition.
struct BufferDecl {
  std::string name;
  MemSpace space = MemSpace::sbuf;
  int32_t partition_start = 0;
  int32_t partitions = 0;
  int64_t offset_bytes = 0;
  int64_t bytes = 0;  // per partition
  bool operator==(const BufferDecl& o) const {
    return name == o.name && space == o.space && partition_start == o.partition_start &&
           partitions == o.partitions && offset_bytes == o.offset_bytes && bytes == o.bytes;
  }
};

// Provenance: the graph node (and the runtime op that recorded it) an instruction implements.
struct NodeInfo {
  int32_t id = 0;
  std::string name;
  std::string op;
  bool operator==(const NodeInfo& o) const { return id == o.id && name == o.name && op == o.op; }
};

// One in-order instruction stream: a compute engine's, or a DMA queue served by `dma_engine`.
struct Stream {
  Engine engine = Engine::vector;
  std::string name;         // DMA queues are named; compute streams are named after the engine
  int32_t dma_engine = -1;  // DMA queues only
  std::vector<Instruction> instructions;
  bool operator==(const Stream& o) const {
    return engine == o.engine && name == o.name && dma_engine == o.dma_engine &&
           instructions == o.instructions;
  }
};

struct Plan {
  std::string name;
  std::vector<ScalarDecl> scalars;
  std::vector<CommDecl> comms;
  std::vector<std::string> semaphores;  // all start at 0 when the plan is launched
  std::vector<TensorDecl> tensors;
  std::vector<BufferDecl> buffers;
  std::vector<NodeInfo> nodes;
  std::vector<Stream> streams;

  int64_t instruction_count() const;
  int find_tensor(std::string_view name) const;  // -1 when absent
  int find_buffer(std::string_view name) const;
  int find_scalar(std::string_view name) const;
  int find_comm(std::string_view name) const;
  int find_semaphore(std::string_view name) const;
  // Bytes of `space` (SBUF or PSUM) that the plan's buffers cover: the union of their byte
  // ranges, summed over partitions (overlapping buffers count once).
  int64_t on_chip_bytes(MemSpace space) const;
  // Bytes of the tensors the plan declares in HBM.
  int64_t hbm_bytes() const;
  // The name an access pattern refers to (a buffer's or a tensor's), or "?" when invalid.
  std::string_view target_name(const AccessPattern& ap) const;
  bool operator==(const Plan& o) const {
    return name == o.name && scalars == o.scalars && comms == o.comms &&
           semaphores == o.semaphores && tensors == o.tensors && buffers == o.buffers &&
           nodes == o.nodes && streams == o.streams;
  }
};

// What a plan file holds: plans launched in order, passing tensors through HBM by name.
struct PlanSequence {
  std::vector<Plan> plans;
  // The (chip, core) each plan runs on, by plan, when the file names any ("core": [chip,
  // core]; a plan that names none runs on [0, 0]); empty for a one-core file.
  std::vector<std::pair<int, int>> cores = {};
  bool operator==(const PlanSequence& o) const { return plans == o.plans && cores == o.cores; }
};

}  // namespace wallsim::isa
