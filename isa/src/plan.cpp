// Plan lookups and sizes.
#include "wallsim/isa/plan.h"

#include <algorithm>
#include <array>
#include <map>

namespace wallsim::isa {
namespace {

constexpr std::array<std::string_view, 4> kRoleNames = {"input", "output", "inout", "scratch"};

template <class T>
int find_by_name(const std::vector<T>& v, std::string_view name) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

std::string_view name_of(TensorRole r) { return kRoleNames[static_cast<size_t>(r)]; }

std::optional<TensorRole> parse_tensor_role(std::string_view s) {
  for (size_t i = 0; i < kRoleNames.size(); ++i) {
    if (kRoleNames[i] == s) return static_cast<TensorRole>(i);
  }
  return std::nullopt;
}

int64_t TensorDecl::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return INT64_MAX;
  }
  return n;
}

int64_t Plan::instruction_count() const {
  int64_t n = 0;
  for (const auto& s : streams) n += static_cast<int64_t>(s.instructions.size());
  return n;
}

int Plan::find_tensor(std::string_view n) const { return find_by_name(tensors, n); }
int Plan::find_buffer(std::string_view n) const { return find_by_name(buffers, n); }
int Plan::find_scalar(std::string_view n) const { return find_by_name(scalars, n); }
int Plan::find_comm(std::string_view n) const { return find_by_name(comms, n); }

int Plan::find_semaphore(std::string_view n) const {
  for (size_t i = 0; i < semaphores.size(); ++i) {
    if (semaphores[i] == n) return static_cast<int>(i);
  }
  return -1;
}

int64_t Plan::hbm_bytes() const {
  int64_t bytes = 0;
  for (const TensorDecl& t : tensors) {
    if (t.space == MemSpace::hbm) bytes += t.elements() * dtype_bytes(t.dtype);
  }
  return bytes;
}

int64_t Plan::on_chip_bytes(MemSpace space) const {
  // Partitions split into bands at every buffer's first and end partition; within a band every
  // partition holds the same buffers, so the band adds (union of their byte ranges) x width.
  std::vector<int32_t> cuts;
  for (const BufferDecl& b : buffers) {
    if (b.space != space || b.partitions <= 0) continue;
    cuts.push_back(b.partition_start);
    cuts.push_back(b.partition_start + b.partitions);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  int64_t total = 0;
  std::vector<std::pair<int64_t, int64_t>> r;
  for (size_t c = 0; c + 1 < cuts.size(); ++c) {
    const int32_t p0 = cuts[c], p1 = cuts[c + 1];
    r.clear();
    for (const BufferDecl& b : buffers) {
      if (b.space == space && b.partition_start <= p0 && p1 <= b.partition_start + b.partitions) {
        r.emplace_back(b.offset_bytes, b.offset_bytes + b.bytes);
      }
    }
    std::sort(r.begin(), r.end());
    int64_t end = INT64_MIN, band = 0;
    for (auto [lo, hi] : r) {
      if (hi <= end) continue;
      band += hi - std::max(lo, end);
      end = hi;
    }
    total += band * (p1 - p0);
  }
  return total;
}

std::string_view Plan::target_name(const AccessPattern& ap) const {
  if (is_on_chip(ap.space)) {
    if (ap.buffer >= 0 && ap.buffer < static_cast<int>(buffers.size()))
      return buffers[ap.buffer].name;
  } else if (ap.buffer >= 0 && ap.buffer < static_cast<int>(tensors.size())) {
    return tensors[ap.buffer].name;
  }
  return "?";
}

}  // namespace wallsim::isa
