// A plan packed into bytes, for holding compiled plans that are not running: an Instruction
// takes 680 bytes in memory (five access patterns of 112 bytes, most of them unused) plus its
// semaphore lists on the heap; packed, it keeps only the fields that differ from a default
// Instruction, as variable-length integers, typically 60-150 bytes. unpack(pack(p)) == p,
// bit for bit in every field (the free dims past num_free included).
#pragma once

#include <cstdint>
#include <vector>

#include "wallsim/isa/plan.h"

namespace wallsim::isa {

class PackedPlan {
 public:
  explicit PackedPlan(const Plan& plan);
  Plan unpack() const;
  // Host bytes held (the declarations' vectors and the packed instruction bytes).
  int64_t bytes() const;
  int64_t instruction_count() const { return m_instructions; }
  // The packed instructions' bytes alone.
  int64_t instruction_bytes() const { return static_cast<int64_t>(m_bytes.size()); }

 private:
  Plan m_decls;                   // the plan without its streams' instructions
  std::vector<int64_t> m_counts;  // instructions per stream
  std::vector<uint8_t> m_bytes;   // every instruction, stream after stream
  int64_t m_instructions = 0;
};

}  // namespace wallsim::isa
