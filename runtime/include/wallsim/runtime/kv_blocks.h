// A paged KV cache's block manager: fixed-size blocks of rows in one HBM pool per layer, a
// block table per sequence, allocation and freeing, and the figures a serving study reports.
// Attention reads K/V through the table by a gather (the rows() of a sequence, uploaded as
// indices), so one plan serves any block layout.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <vector>

namespace wallsim::runtime {

class KvBlockManager {
 public:
  // `blocks` blocks of `block_size` rows. With `scatter_seed`, free blocks are handed out in a
  // seeded random order (layouts far from contiguous); without, in ascending order.
  KvBlockManager(int64_t blocks, int64_t block_size, std::optional<uint64_t> scatter_seed = {});

  // Grows sequence `seq` to hold `tokens` tokens. False (and nothing allocated) when the free
  // blocks do not suffice.
  bool reserve(int64_t seq, int64_t tokens);
  // Frees every block of `seq`.
  void release(int64_t seq);

  const std::vector<int64_t>& table(int64_t seq) const { return m_tables.at(seq).blocks; }
  // The pool row holding token `pos` of `seq`.
  int64_t row(int64_t seq, int64_t pos) const;
  // Pool rows of tokens [0, len) of `seq`; positions past its tokens read row 0 (masked).
  std::vector<float> rows(int64_t seq, int64_t len) const;

  int64_t block_size() const { return m_block_size; }
  int64_t blocks() const { return m_blocks; }
  int64_t used_blocks() const { return m_blocks - static_cast<int64_t>(m_free.size()); }
  int64_t tokens() const;
  // Tokens stored / rows of the blocks in use (1 - internal fragmentation); 1 when empty.
  double utilization() const;

 private:
  struct Table {
    std::vector<int64_t> blocks;
    int64_t tokens = 0;
  };
  int64_t m_blocks;
  int64_t m_block_size;
  std::vector<int64_t> m_free;  // handed out from the back
  std::map<int64_t, Table> m_tables;
};

}  // namespace wallsim::runtime
