// ArchSpec queries and cross-field consistency checks.
#include "wallsim/isa/arch_spec.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace wallsim::isa {

using base::InputError;
namespace {

bool contains(const std::vector<MemSpace>& v, MemSpace s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

const SpaceAccess& AccessRules::of(Engine e) const {
  switch (e) {
    case Engine::tensor:
      return tensor;
    case Engine::vector:
      return vector;
    case Engine::scalar:
      return scalar;
    case Engine::dma:
      return dma;
  }
  return dma;
}

bool ArchSpec::may_read(Engine e, MemSpace s) const { return contains(access.of(e).reads, s); }
bool ArchSpec::may_write(Engine e, MemSpace s) const { return contains(access.of(e).writes, s); }

int32_t ArchSpec::partitions(MemSpace s) const {
  if (s == MemSpace::sbuf) return sbuf.partitions;
  if (s == MemSpace::psum) return psum.partitions;
  return 0;
}

int64_t ArchSpec::bytes_per_partition(MemSpace s) const {
  if (s == MemSpace::sbuf) return sbuf.bytes_per_partition;
  if (s == MemSpace::psum) return psum.bytes_per_partition;
  return 0;
}

void check_consistency(const ArchSpec& a, const std::string& prefix) {
  auto fail = [&](const std::string& path, const std::string& problem) {
    throw InputError(prefix + "." + path, problem);
  };
  if (a.tensor.rows > a.sbuf.partitions) {
    fail("tensor.rows", "array rows (" + std::to_string(a.tensor.rows) +
                            ") exceed SBUF partitions (" + std::to_string(a.sbuf.partitions) + ")");
  }
  if (a.tensor.cols > a.psum.partitions) {
    fail("tensor.cols", "array columns (" + std::to_string(a.tensor.cols) +
                            ") exceed PSUM partitions (" + std::to_string(a.psum.partitions) + ")");
  }
  if (a.psum.bank_bytes > a.psum.bytes_per_partition) {
    fail("psum.bank_bytes",
         "a bank (" + std::to_string(a.psum.bank_bytes) + " bytes) is larger than PSUM (" +
             std::to_string(a.psum.bytes_per_partition) + " bytes per partition)");
  }
  if (a.psum.bytes_per_partition % a.psum.bank_bytes != 0) {
    fail("psum.bank_bytes", "PSUM bytes per partition (" +
                                std::to_string(a.psum.bytes_per_partition) +
                                ") is not a whole number of banks");
  }
  if (int64_t{a.tensor.moving_free_max} * 4 > a.psum.bank_bytes) {
    fail("tensor.moving_free_max", std::to_string(a.tensor.moving_free_max) +
                                       " fp32 outputs do not fit one PSUM bank (" +
                                       std::to_string(a.psum.bank_bytes) + " bytes)");
  }
  if (a.partition_alignment > a.sbuf.partitions || a.sbuf.partitions % a.partition_alignment) {
    fail("partition_alignment",
         "must divide SBUF partitions (" + std::to_string(a.sbuf.partitions) + ")");
  }
  if (a.may_read(Engine::dma, MemSpace::psum) || a.may_write(Engine::dma, MemSpace::psum)) {
    fail("access.dma", "DMA engines cannot access PSUM");
  }
}

void CostHints::require_priced(const char* who) const {
  if (priced()) return;
  throw std::invalid_argument(std::string(who) +
                              ": the ArchSpec's cost hints are unset (no engine rates): build it "
                              "from a chip config (sim::cost_hints of its timing section)");
}

}  // namespace wallsim::isa
