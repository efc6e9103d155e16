// The ranks of a distributed run, their cores and communicators.
#include "wallsim/runtime/process_group.h"

#include <tuple>

#include "wallsim/base/params.h"

namespace wallsim::runtime {

ProcessGroup::ProcessGroup(ParallelSizes sizes, int64_t chips, int64_t cores_per_chip,
                           const std::string& what)
    : m_sizes(sizes), m_cores_per_chip(cores_per_chip) {
  if (sizes.tp < 1 || sizes.pp < 1 || sizes.dp < 1) {
    throw base::InputError(what, "tp, pp and dp must be at least 1");
  }
  const int64_t cores = chips * cores_per_chip;
  if (sizes.world() > cores) {
    throw base::InputError(
        what, std::to_string(sizes.world()) + " ranks (tp " + std::to_string(sizes.tp) + " x pp " +
                  std::to_string(sizes.pp) + " x dp " + std::to_string(sizes.dp) +
                  ") need as many cores; the " + "system has " + std::to_string(cores) + " (" +
                  std::to_string(chips) + " chips of " + std::to_string(cores_per_chip) +
                  "; more with --set chip.cores=N or topology.instances=N)");
  }
}

std::pair<int, int> ProcessGroup::place(int64_t rank) const {
  return {static_cast<int>(rank / m_cores_per_chip), static_cast<int>(rank % m_cores_per_chip)};
}

int64_t ProcessGroup::chips_used() const {
  return (world() + m_cores_per_chip - 1) / m_cores_per_chip;
}

RankContext ProcessGroup::context(int64_t rank) const {
  const ParallelSizes& s = m_sizes;
  RankContext c;
  c.rank = rank;
  c.sizes = s;
  c.tp_rank = rank % s.tp;
  c.pp_rank = rank / s.tp % s.pp;
  c.dp_rank = rank / (s.tp * s.pp);
  std::tie(c.chip, c.core) = place(rank);
  // A communicator's members: the ranks that differ from this one only in its coordinate.
  auto group = [&](int64_t size, int64_t stride, int64_t mine) {
    std::vector<std::pair<int, int>> members;
    const int64_t first = rank - mine * stride;
    for (int64_t k = 0; k < size; ++k) members.push_back(place(first + k * stride));
    return members;
  };
  if (s.world() > 1) c.comms["world"] = group(s.world(), 1, rank);
  if (s.tp > 1) c.comms["tp"] = group(s.tp, 1, c.tp_rank);
  if (s.pp > 1) c.comms["pp"] = group(s.pp, s.tp, c.pp_rank);
  if (s.dp > 1) c.comms["dp"] = group(s.dp, s.tp * s.pp, c.dp_rank);
  return c;
}

}  // namespace wallsim::runtime
