// The paged KV cache's block manager.
#include "wallsim/runtime/kv_blocks.h"

#include <algorithm>
#include <stdexcept>

namespace wallsim::runtime {

KvBlockManager::KvBlockManager(int64_t blocks, int64_t block_size,
                               std::optional<uint64_t> scatter_seed)
    : m_blocks(blocks), m_block_size(block_size) {
  if (blocks <= 0 || block_size <= 0) throw std::invalid_argument("KvBlockManager: empty pool");
  for (int64_t b = blocks; b-- > 0;) m_free.push_back(b);  // block 0 first
  if (scatter_seed) {
    std::mt19937_64 rng(*scatter_seed);
    for (size_t i = m_free.size(); i > 1; --i) {  // Fisher-Yates with a fixed mapping
      std::swap(m_free[i - 1], m_free[static_cast<size_t>(rng() % i)]);
    }
  }
}

bool KvBlockManager::reserve(int64_t seq, int64_t tokens) {
  Table& t = m_tables[seq];
  const int64_t need = (tokens + m_block_size - 1) / m_block_size;
  const int64_t more = need - static_cast<int64_t>(t.blocks.size());
  if (more > static_cast<int64_t>(m_free.size())) {
    if (t.blocks.empty()) m_tables.erase(seq);
    return false;
  }
  for (int64_t i = 0; i < more; ++i) {
    t.blocks.push_back(m_free.back());
    m_free.pop_back();
  }
  t.tokens = std::max(t.tokens, tokens);
  return true;
}

void KvBlockManager::release(int64_t seq) {
  auto it = m_tables.find(seq);
  if (it == m_tables.end()) return;
  for (auto b = it->second.blocks.rbegin(); b != it->second.blocks.rend(); ++b)
    m_free.push_back(*b);
  m_tables.erase(it);
}

int64_t KvBlockManager::row(int64_t seq, int64_t pos) const {
  const Table& t = m_tables.at(seq);
  return t.blocks.at(static_cast<size_t>(pos / m_block_size)) * m_block_size + pos % m_block_size;
}

std::vector<float> KvBlockManager::rows(int64_t seq, int64_t len) const {
  const Table& t = m_tables.at(seq);
  std::vector<float> out(static_cast<size_t>(len), 0.0f);
  for (int64_t p = 0; p < std::min(len, t.tokens); ++p) {
    out[static_cast<size_t>(p)] = static_cast<float>(row(seq, p));
  }
  return out;
}

int64_t KvBlockManager::tokens() const {
  int64_t n = 0;
  for (const auto& [seq, t] : m_tables) n += t.tokens;
  return n;
}

double KvBlockManager::utilization() const {
  const int64_t rows = used_blocks() * m_block_size;
  return rows > 0 ? double(tokens()) / double(rows) : 1.0;
}

}  // namespace wallsim::runtime
