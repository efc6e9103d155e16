// ProcessGroup: the ranks of a distributed run and where they sit — one rank per core of the
// System, in (chip, core) order — with their tensor-, pipeline- and data-parallel
// communicators, as torch.distributed's process groups and NeuronX Distributed's
// parallel_state lay them out (tensor parallel fastest, then pipeline, then data).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace wallsim::runtime {

// How many ways a workload is split: tensor, pipeline and data parallel.
struct ParallelSizes {
  int64_t tp = 1, pp = 1, dp = 1;
  int64_t world() const { return tp * pp * dp; }
  // The rank at these coordinates (tensor parallel fastest, then pipeline, then data).
  int64_t rank_of(int64_t tp_rank, int64_t pp_rank, int64_t dp_rank) const {
    return (dp_rank * pp + pp_rank) * tp + tp_rank;
  }
};

// One rank's place in the group, as its Session sees it.
struct RankContext {
  int64_t rank = 0;
  ParallelSizes sizes;
  int64_t tp_rank = 0, pp_rank = 0, dp_rank = 0;
  int chip = 0, core = 0;
  // Its communicators by name ("world", "tp", "pp", "dp"; only those of more than one rank):
  // the (chip, core) of each member, in rank order within the communicator.
  std::map<std::string, std::vector<std::pair<int, int>>> comms;
  int64_t world() const { return sizes.world(); }
  // The communicator's size (1 for a name the rank has none of: a group of itself).
  int64_t comm_size(const std::string& name) const {
    auto it = comms.find(name);
    return it == comms.end() ? 1 : static_cast<int64_t>(it->second.size());
  }
};

class ProcessGroup {
 public:
  // Ranks 0 .. sizes.world() - 1 on the first world() cores of a system of `chips` chips of
  // `cores_per_chip` cores, rank r on core r % cores_per_chip of chip r / cores_per_chip.
  // Throws base::InputError (naming `what`) when the system has too few cores.
  ProcessGroup(ParallelSizes sizes, int64_t chips, int64_t cores_per_chip, const std::string& what);
  int64_t world() const { return m_sizes.world(); }
  const ParallelSizes& sizes() const { return m_sizes; }
  // Rank r's place and communicators.
  RankContext context(int64_t rank) const;
  // How many chips the ranks span.
  int64_t chips_used() const;

 private:
  std::pair<int, int> place(int64_t rank) const;
  ParallelSizes m_sizes;
  int64_t m_cores_per_chip;
};

}  // namespace wallsim::runtime
