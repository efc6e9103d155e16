// OnChipStore: size checks and the zero-filled allocation.
#include "wallsim/memory/on_chip_store.h"

#include <stdexcept>
#include <string>

namespace wallsim::memory {
namespace {

size_t checked_size(int32_t partitions, int64_t bytes_per_partition) {
  int64_t total = 0;
  if (partitions < 0 || bytes_per_partition < 0 ||
      __builtin_mul_overflow(int64_t{partitions}, bytes_per_partition, &total)) {
    throw std::invalid_argument("on-chip store of " + std::to_string(partitions) + " x " +
                                std::to_string(bytes_per_partition) + " bytes is invalid");
  }
  return static_cast<size_t>(total);
}

}  // namespace

OnChipStore::OnChipStore(int32_t partitions, int64_t bytes_per_partition)
    : m_partitions(partitions),
      m_bytes_per_partition(bytes_per_partition),
      m_bytes(checked_size(partitions, bytes_per_partition)) {}

}  // namespace wallsim::memory
