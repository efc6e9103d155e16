// Max-min fair sharing of bandwidth among transfers that each cross a set of resources.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "wallsim/memory/bandwidth_share.h"

namespace wallsim::memory {

// A fluid model of shared bandwidth: every transfer in flight moves at a constant rate until a
// transfer starts or finishes; then all rates are recomputed by progressive filling (max-min
// fairness): the most constrained resource gives its transfers an equal rate (each taking its
// weight times that rate of the resource), those transfers and their consumption are removed,
// and the next most constrained resource follows. The "max_min_fair" BandwidthShare.
// Only the transfers connected to a start or finish (sharing a resource with it, directly or
// through other transfers: its connected component) get new rates; the others keep theirs, which
// is exactly what a recomputation of every transfer would give them, so independent parts of a
// system (two chips, two cores' private engines) never pay for each other's rate changes.
//
// Contract: plain C++, no SystemC, not thread-safe. Time is in picoseconds and never goes back:
// every `now` passed in must be >= the previous one. Finish times are whole picoseconds, rounded
// up. A transfer stops taking bandwidth at its own finish time even when the caller polls later
// (start() and advance() both replay the finish events up to `now`); it is handed back by the
// first advance() whose `now` reaches its finish time. Cost per start or finish is
// O(transfers x resources) of its connected component (plus one multiply-add per transfer in
// flight to bring its remaining bytes up to date), independent of bytes and of simulated time;
// O(its own resources) when it provably changes no other rate (a component whose last filling
// took one round, and an event on resources that were not at its share: fluid_share.cpp).
// Results are deterministic, transfers are reported in id order (the order of the start()
// calls), and rates do not depend on the order of resources or transfers: weights are summed
// exactly (integers in units of 2^-80, exact for weights >= 2^-27), every resource whose share
// ties at a round's minimum is frozen in that round, at that share, and each resource's free
// capacity is decremented once per round by its round's total weight. So symmetric resources
// get bit-equal rates, and one transfer of multiplicity m is bit for bit m identical ones.
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
  // Each weight in [1e-12, 2^24], each count and the multiplicity in [1, 2^24], or
  // std::invalid_argument (a use's fixed-point weight is weight x count x multiplicity, exact);
  // std::overflow_error if a resource's summed weight passes 2^127 units (2^47 transfers of
  // weight 1 at once: never in practice).
  uint64_t start_weighted(Ps now, double bytes, std::vector<ResourceUse> uses,
                          int64_t multiplicity = 1) override;
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
  // Resources whose allocated rate was recomputed since the last call (each once, in the order
  // first touched); clears the list. Rates of the others have not changed.
  std::vector<int> take_touched() override;

  // Inner-loop steps executed so far (rate recomputation and progress), for tests and
  // benchmarks that check the cost does not depend on bytes or time.
  uint64_t work() const { return m_work; }
  // Events (starts, and finish times) whose rates were proven unchanged without refilling
  // their component (see start_fast, finish_fast); for tests and benchmarks.
  uint64_t fast_events() const { return m_fast_events; }
  // false: every event refills its component (the reference the fast paths are tested against).
  void set_incremental(bool on) { m_incremental = on; }

 private:
  // A weight as an exact integer: units of 2^-80 of a byte of capacity per byte moved.
  using Fixed = __int128;
  struct Use {
    int resource;
    Fixed weight;  // the transfer's weight times its multiplicity
  };
  struct Resource {
    std::string name;
    double capacity;       // bytes/second
    double allocated;      // bytes/second given to transfers now
    double free;           // scratch: capacity left during progressive filling
    int unfrozen;          // scratch: transfers still to be given a rate
    Fixed demand;          // scratch: the sum of their weights
    double demand_double;  // scratch: demand as a double (rounded once)
    Fixed round_weight;    // scratch: weight frozen in the current round
    Fixed load;            // the sum of its active users' weights (exact)
    // > 0: its component's last filling was one round at this share (every transfer of it
    // frozen at it); -1: not known. Meaningful while it has users.
    double solo;
    std::vector<uint64_t> users;  // ids of the active transfers using it, ascending
    uint64_t mark;                // scratch: last component search that reached it
    bool touched;                 // listed in m_touched
  };
  struct Transfer {
    uint64_t id;
    double remaining;       // at m_now
    double rate;            // bytes/second; -1 until first computed
    Ps finish;              // whole ps, rounded up; INT64_MAX while the rate is 0
    std::vector<Use> uses;  // sorted by resource, distinct
    bool frozen;            // scratch: rate fixed during progressive filling
    uint64_t mark;          // scratch: last component search that reached it
    uint64_t queued;        // generation of its live entry in m_finishes (0: none)
  };
  // A finish event: (finish, id) ordered; current only while `generation` equals the
  // transfer's `queued` (a rate change queues a new entry and leaves the old one stale).
  struct FinishEntry {
    Ps finish;
    uint64_t id;
    uint64_t generation;
  };

  void check_resource(int r) const;
  // Processes every finish event up to `now`, then progresses all transfers to `now`.
  void run_until(Ps now);
  void progress(Ps now);
  // Index in m_active of active transfer `id` (which must be active).
  size_t index_of(uint64_t id) const;
  // The same index, searched from `from` (<= the index) by galloping: ascending ids cost O(1)
  // each when dense.
  size_t index_from(size_t from, uint64_t id) const;
  // Finish-event queue (a binary min-heap on (finish, id) with stale entries skipped).
  bool is_current(const FinishEntry& e) const;
  void queue_finish(Transfer& t);
  void drop_stale();  // pops stale entries off the top, so the top is current (or none)
  void compact_finishes();
  // Recomputes the rates of every transfer connected to the resources in m_seeds.
  void recompute_component();
  // The fast paths: true (having set the rates, allocations and finish events a refill would
  // set) when the event provably changes no other transfer's rate; false, changing nothing,
  // otherwise. start_fast: `t`, just added (users and loads included). finish_fast: m_done's
  // transfers, still active.
  bool start_fast(Transfer& t);
  bool finish_fast();
  void touch(int r);
  Ps finish_time(const Transfer& t) const;

  std::vector<Resource> m_resources;
  std::vector<Transfer> m_active;    // in flight, in id order
  std::vector<Transfer> m_finished;  // finished, not yet returned by advance(), in id order
  // Finish events of the active transfers, a min-heap on (finish, id); entries of transfers
  // whose rate has changed since, or that have finished, are stale and skipped.
  std::vector<FinishEntry> m_finishes;
  uint64_t m_generation = 0;     // of the last queued entry
  std::vector<uint64_t> m_done;  // run_until's scratch: ids finishing at one time
  std::vector<int> m_touched;
  Ps m_now = 0;
  uint64_t m_next_id = 0;
  uint64_t m_work = 0;
  uint64_t m_search = 0;  // component searches so far (the marks' epoch)
  uint64_t m_fast_events = 0;
  bool m_incremental = true;
  // recompute_component()'s scratch, kept to avoid allocating on every start and finish.
  std::vector<int> m_seeds;                   // resources a start or finish touched
  std::vector<int32_t> m_stack;               // the component search's resources to visit
  std::vector<int32_t> m_component;           // its resources, ascending
  std::vector<int32_t> m_members;             // its transfers' indices in m_active, ascending
  std::vector<std::vector<int32_t>> m_users;  // per resource: member transfers' indices
  std::vector<int32_t> m_live;                // resources with unfrozen transfers
  std::vector<int32_t> m_tied;                // a round's resources at the minimum share
  std::vector<int32_t> m_round;               // resources a round's freezes decrement
  std::vector<double> m_new_rate;             // per member transfer
};

}  // namespace wallsim::memory
