// OnChipStore: the backing bytes of a partitioned on-chip memory (SBUF or PSUM).
#pragma once

#include <cstdint>
#include <vector>

namespace wallsim::memory {

// `partitions` rows of `bytes_per_partition` bytes each, zero-filled, in one contiguous
// allocation (partition-major). at() does not check bounds: callers (tile_io) check a whole
// access once. Pointers stay valid for the store's lifetime.
class OnChipStore {
 public:
  // Throws std::invalid_argument for negative or overflowing sizes.
  OnChipStore(int32_t partitions, int64_t bytes_per_partition);

  uint8_t* at(int32_t partition, int64_t byte) {
    return m_bytes.data() + partition * m_bytes_per_partition + byte;
  }
  const uint8_t* at(int32_t partition, int64_t byte) const {
    return m_bytes.data() + partition * m_bytes_per_partition + byte;
  }
  int32_t partitions() const { return m_partitions; }
  int64_t bytes_per_partition() const { return m_bytes_per_partition; }

 private:
  int32_t m_partitions;
  int64_t m_bytes_per_partition;
  std::vector<uint8_t> m_bytes;
};

}  // namespace wallsim::memory
