// The chips' collective engines: collectives meet here once every rank of a communicator has
// issued its own, then run their algorithm (collectives/schedule.h) as transfers on the
// system's network plus each step's reduction time, on a collective core of every chip they
// span. A SystemC adapter over plain-C++ schedules; the System wires it.
#pragma once

#include <systemc>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "wallsim/collectives/collective_config.h"
#include "wallsim/collectives/schedule.h"
#include "wallsim/dma/network.h"
#include "wallsim/engines/launch.h"
#include "wallsim/sim/topology.h"
#include "wallsim/traces/stats.h"

namespace wallsim::sim {

// The levels a communicator's ranks ((chip, core) each) form for a hierarchical collective
// under `hierarchy`, innermost first (rank r = i0 + d0 (i1 + ...)), or none: flat. Two levels
// (auto, instances): Y > 1 ranks in each of X > 1 instances, each instance's ranks one after
// another. dimensions: one level per coordinate (core, torus x, torus y, instance) that varies,
// when the ranks are every combination in that mixed-radix order; else as instances.
std::vector<int> hierarchy_levels(const std::vector<std::pair<int, int>>& ranks,
                                  const Topology& topology, collectives::Hierarchy hierarchy);

// SPMD folding (docs/DISTRIBUTED.md): one rank, the representative, runs for the ranks it
// stands for, which issue the same collectives in the same picosecond. The caller says who they
// are and what the world's communicators are; nothing here guesses them.
struct CollectiveFold {
  std::pair<int, int> representative{0, 0};  // (chip, core)
  std::vector<std::pair<int, int>> ranks;    // the ranks it stands for, itself included
  struct Communicator {
    std::string name;                          // as plans name it (isa::CommDecl)
    std::vector<std::pair<int, int>> members;  // (chip, core) by rank within it
  };
  // Every communicator of the world. Those of one name partition ranks they span and run the
  // same collectives at the same time: each is a twin of the others.
  std::vector<Communicator> communicators;
};

class CollectiveEngine : public sc_core::sc_module {
 public:
  // `route(a, b)` gives what a transfer from chip a's HBM to chip b's crosses (a == b: the
  // chip's HBM, read and written). `topology` places the chips (for hierarchical collectives).
  CollectiveEngine(sc_core::sc_module_name name, const collectives::CollectivesConfig& config,
                   dma::Network& network, const Topology& topology,
                   std::function<dma::Route(int, int)> route);
  ~CollectiveEngine() override;

  // Folds the collectives (before the simulation starts): only the representative issues
  // collectives, and a meeting of one of its communicators is complete when it arrives — the
  // absent members' arrivals are taken to be its own (same instruction, queue and time) — and
  // moves its twins' traffic with its own: each twin's sends from its own members' chips and
  // keys, as the twin's meeting would unfolded (dma::Network::transfer_all merges identical
  // ones), taking a collective core per twin on each chip the twin spans. Each step, every
  // twin's end (and fixed cost) must be the representative's own, and a ready meeting with twins
  // must find every twin's collective cores at once (unfolded, twins that wait could start apart,
  // or behind a meeting keyed between two of them; runtime::decide_fold admits only runs whose
  // communicators a chip, summed over the kinds, fit its collective cores); otherwise the run is
  // not exact and the collective fails with a message naming the twin's ranks ("SPMD folding is
  // not exact ..."). Send
  // and recv do not fold. Throws std::invalid_argument for a communicator with a member the
  // representative does not stand for, two of one name sharing a rank or differing in size or in
  // hierarchy levels, or more of one name on a chip than it has collective cores (they would run in
  // turn).
  void set_fold(CollectiveFold fold);
  bool folded() const { return m_fold.has_value(); }

  // Runs collective instruction `in` of `launch` for core (chip, core), issued on DMA queue
  // `queue`, from that queue's SC_THREAD: blocks until the collective has completed on every
  // rank (in functional mode, each rank's destination is written then). Throws
  // memory::MemoryError when the core is not a rank of the bound communicator or when the
  // ranks issue different collectives (folded: when the core is not the representative or the
  // communicator not one of the fold's).
  void run(const isa::Instruction& in, engines::Launch& launch, int chip, int core, int queue);

  // One line per collective some rank issued and another never did: the communicator, the
  // collective's index and which ranks arrived.
  std::vector<std::string> stuck_report() const;

  // A completed collective: from the last rank's arrival to the end of its last step.
  struct Record {
    std::string comm;
    int64_t index = 0;
    collectives::CollectiveOp op = collectives::CollectiveOp::all_reduce;
    collectives::Algorithm algorithm = collectives::Algorithm::ring;
    std::string label;        // the algorithm, or "hier:" and each stage's (Schedule::label)
    std::vector<int> levels;  // hierarchical: the level sizes, innermost first; flat: empty
    int ranks = 0;
    double bytes = 0;  // the nccl-tests size
    int64_t ready_ps = 0, start_ps = 0, end_ps = 0;
    // The resource (link, NIC or HBM) that bound it: the one whose share of the collective's
    // traffic needs the most time at its full bandwidth, and that time.
    std::string bound_by;
    double bound_ns = 0;
    // Its ranks' (chip, core) and when each issued it (send/recv: sender, receiver): a rank is
    // blocked in it from its arrival to end_ps (the runtime's comm_wait, issue 38).
    std::vector<std::pair<int, int>> members;
    std::vector<int64_t> arrived_ps;
    // Folded: the communicators of its name it stands for, itself included (their moves ran
    // with its own); 1 when not folded.
    int twins = 1;
    // Per twin (index 0: its own, as bound_by and bound_ns): the resource that bound the
    // twin's own traffic, and that time.
    std::vector<std::string> twin_bound_by;
    std::vector<double> twin_bound_ns;
  };
  const std::vector<Record>& records() const { return m_records; }
  // Per communicator and op: collectives, bytes and time under "<scope>.collectives.".
  // Folded: each record counts as its twins would (twins times, each with its own bound_by),
  // and "twins" is written.
  void write_stats(traces::StatsRegistry& stats, const std::string& scope) const;

 private:
  struct Arrival;
  struct Meeting;
  void schedule();
  void execute(Meeting* m);
  void write_results(Meeting& m, collectives::CollectiveOp op);
  // Folded: a ready meeting with twins that does not fit: the message that the fold is not
  // exact (a twin would start alone unfolded, or the twins wait for cores that another meeting
  // could take between them); "" for a meeting without twins, which waits as unfolded.
  std::string partial_start(const Meeting& m) const;
  // Folded: checks that (chip, core) may issue a collective on communicator `name` of `ranks`
  // and returns the twins that meeting stands for: its own first, then the others in meeting
  // key order (the order their meetings would start in unfolded).
  std::vector<const CollectiveFold::Communicator*> fold_twins(
      const std::string& name, const std::vector<std::pair<int, int>>& ranks,
      std::pair<int, int> core, bool pair) const;

  collectives::CollectivesConfig m_config;
  dma::Network& m_network;
  const Topology& m_topology;
  std::function<dma::Route(int, int)> m_route;
  std::vector<int> m_free_cores;                       // by chip
  std::map<std::pair<int, int>, dma::Route> m_routes;  // by (chip, chip), as first asked for
  // Meetings by key (communicator, collective index or send/recv pair): stable addresses.
  std::map<std::string, std::unique_ptr<Meeting>> m_meetings;
  std::map<std::string, int64_t> m_next_index;  // by communicator and rank (or pair)
  std::vector<Meeting*> m_ready;                // every rank arrived, waiting for cores
  sc_core::sc_event m_schedule;
  std::vector<Record> m_records;
  std::optional<CollectiveFold> m_fold;
};

}  // namespace wallsim::sim
