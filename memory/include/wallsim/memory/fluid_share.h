// Max-min fair sharing of bandwidth among transfers that each cross a set of resources.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wallsim/memory/bandwidth_share.h"

namespace wallsim::memory {

// A fluid model of shared bandwidth: every transfer in flight moves at a constant rate until a
// transfer starts or finishes; then all rates are recomputed by progressive filling (max-min
// fairness): the most constrained resource gives its transfers an equal rate (each taking its
// weight times that rate of the resource), those transfers and their consumption are removed,
// and the next most constrained resource follows. The "max_min_fair" BandwidthShare.
//
// Contract: plain C++, no SystemC, not thread-safe. Time is in picoseconds and never goes back:
// every `now` passed in must be >= the previous one. Finish times are whole picoseconds, rounded
// up. A transfer stops taking bandwidth at its own finish time even when the caller polls later
// (start() and advance() both replay the finish events up to `now`); it is handed back by the
// first advance() whose `now` reaches its finish time. Cost per start or finish is
// O(transfers x resources), independent of bytes and of simulated time. Results are
// deterministic: ties go to the lowest resource index, transfers are reported in id order.
class FluidShare final : public BandwidthShare {
 public:
  using Ps = BandwidthShare::Ps;  // picoseconds, the simulator's time resolution

  // Adds a resource with a capacity > 0; returns its index (0, 1, 2, ... in call order).
  int add_resource(std::string name, double bytes_per_second) override;
  // Starts a transfer of `bytes` >= 0 over `resources` (valid, non-empty, duplicates ignored)
  // at `now`, after progressing every transfer to `now`. Returns its id (0, 1, 2, ...).
  // A transfer of 0 bytes finishes at `now`.
  // Weight 1 on each resource (duplicates count once).
  uint64_t start(Ps now, double bytes, std::vector<int> resources);
  uint64_t start_weighted(Ps now, double bytes, std::vector<ResourceUse> uses) override;
  // Earliest finish time of a transfer not yet returned by advance(); INT64_MAX if none.
  Ps next_finish() const override;
  // Progresses every transfer to `now`; removes and returns, in id order, the transfers whose
  // finish time is <= `now`.
  std::vector<uint64_t> advance(Ps now) override;
  // Current bytes/second of a transfer not yet returned by advance() (0 once it has finished).
  // Throws std::out_of_range for an unknown or already returned id.
  double rate(uint64_t id) const;
  // Bytes/second currently allocated on resource r (the sum of its transfers' rates).
  double resource_rate(int r) const override;
  // Transfers started and not yet returned by advance().
  size_t active() const;
  const std::string& resource_name(int r) const override;
  double resource_capacity(int r) const override;
  size_t resources() const override { return m_resources.size(); }

  // Inner-loop steps executed so far (rate recomputation and progress), for tests and
  // benchmarks that check the cost does not depend on bytes or time.
  uint64_t work() const { return m_work; }

 private:
  struct Resource {
    std::string name;
    double capacity;   // bytes/second
    double allocated;  // bytes/second given to transfers now
    double free;       // scratch: capacity left during progressive filling
    int unfrozen;      // scratch: transfers still to be given a rate
    double demand;     // scratch: the sum of their weights
  };
  struct Transfer {
    uint64_t id;
    double remaining;               // at m_now
    double rate;                    // bytes/second; -1 until first computed
    Ps finish;                      // whole ps, rounded up; INT64_MAX while the rate is 0
    std::vector<ResourceUse> uses;  // sorted by resource, distinct
    bool frozen;                    // scratch: rate fixed during progressive filling
  };

  void check_resource(int r) const;
  // Processes every finish event up to `now`, then progresses all transfers to `now`.
  void run_until(Ps now);
  void progress(Ps now);
  void recompute_rates();
  Ps finish_time(const Transfer& t) const;

  std::vector<Resource> m_resources;
  std::vector<Transfer> m_active;    // in flight, in id order
  std::vector<Transfer> m_finished;  // finished, not yet returned by advance(), in id order
  Ps m_now = 0;
  Ps m_next_active_finish = INT64_MAX;
  uint64_t m_next_id = 0;
  uint64_t m_work = 0;
  // recompute_rates()' scratch, kept to avoid allocating on every start and finish.
  std::vector<std::vector<int32_t>> m_users;  // per resource: active transfers' indices
  std::vector<int32_t> m_live;                // resources with unfrozen transfers
  std::vector<double> m_new_rate;             // per active transfer
};

}  // namespace wallsim::memory
