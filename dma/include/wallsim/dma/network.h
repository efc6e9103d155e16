// Network: the one bandwidth network of a simulation (every DMA engine, HBM, host link, link
// direction and NIC as a named resource) and its SystemC side: routes, ordered starts, wake-ups.
#pragma once

#include <systemc>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "wallsim/memory/bandwidth_share.h"
#include "wallsim/traces/trace_sink.h"

namespace wallsim::dma {

// What a transfer crosses: the resources with their weights (bytes of capacity per byte moved),
// and the latency after its last byte (paid by the caller, outside the network).
struct Route {
  std::vector<memory::ResourceUse> uses;
  int64_t latency_ns = 0;
  bool proxied = false;  // crosses EFA: the host's network-proxy thread drives it (collectives)
};

// Who starts a transfer: transfers that start in the same picosecond are applied in (chip,
// core, queue, sequence) order, the sequence counting the starts of one (chip, core, queue).
// Queue -1 is a core's plan launcher (instruction fetch).
struct TransferKey {
  int chip = 0, core = 0, queue = 0;
};

class Network : public sc_core::sc_module {
 public:
  using Ps = memory::BandwidthShare::Ps;

  // `sharing` names the memory::BandwidthShare policy (throws std::invalid_argument if
  // unknown). `ordered`: starts are collected and applied a delta cycle later in key order
  // (the order does not depend on SystemC's run queue); otherwise each is applied at once, in
  // the order the starting processes run.
  Network(sc_core::sc_module_name name, const std::string& sharing, bool ordered);
  ~Network() override;

  // Adds a resource (before the simulation starts); returns its index. Names are for reports.
  int add_resource(std::string name, double bytes_per_second);
  // SPMD folding (docs/DISTRIBUTED.md): one rank simulated for the k identical ranks whose
  // transfers start in the same picosecond as its own. `counts` has an entry per resource: how
  // many transfers each transfer started here stands for on it (1 on the representative's own
  // engines, k on a resource its k ranks share: memory::ResourceUse::count), or 0 for one a
  // folded run must not touch (another rank's engines, a resource ranks elsewhere share);
  // a transfer() over a 0 throws std::logic_error naming it. Bytes and load count each
  // transfer's count times. transfer_all()'s moves are charged as given, counts and
  // multiplicities included: the collective engine moves every member's sends itself, and its
  // twin communicators' as Move::multiplicity. Empty (the default): not folded, every count 1.
  // Before the simulation starts; throws std::invalid_argument for a size other than resources() or
  // a count outside [0, 2^24].
  void set_fold(std::vector<int64_t> counts);
  // Folding across chips: `counts` as above, and for each chip c of `mirrors` (every chip the
  // folded ranks fill but chip 0) the image of each resource the representative uses (its
  // HBM, host link and DMA engines) on chip c, -1 for none. Every transfer() of the
  // representative also starts a copy on each mirror's images, with the same counts, keyed
  // {c, core, queue} and counted as that chip's own; the copies must finish in the
  // representative's picosecond (else fold_mismatch() says so, and the next transfer() throws
  // std::runtime_error with it). Mirrors need ordered starts (throws std::invalid_argument).
  struct FoldMap {
    std::vector<int64_t> counts;
    struct Mirror {
      int chip = 0;
      std::vector<int> image;  // by resource
    };
    std::vector<Mirror> mirrors;
  };
  void set_fold(FoldMap map);
  bool folded() const { return !m_fold.empty(); }
  // The first copy that finished at another time than the representative's transfer, as one
  // line naming the chip; none while the fold is exact.
  std::optional<std::string> fold_mismatch() const { return m_mismatch; }
  // Moves `bytes` over `uses` from the calling SC_THREAD, under fair sharing; returns when the
  // last byte has moved (latency is the caller's).
  void transfer(const TransferKey& key, double bytes, std::vector<memory::ResourceUse> uses);
  // One of the transfers transfer_all() moves together.
  // `multiplicity` m >= 1: the move stands for m identical ones started together (a folded
  // collective's twin communicators, sim::CollectiveFold), charged and shared as m moves.
  struct Move {
    TransferKey key;
    double bytes = 0.0;
    std::vector<memory::ResourceUse> uses;
    int64_t multiplicity = 1;
  };
  // Moves every one of `moves` from the calling SC_THREAD, exactly as that many transfer()
  // calls from as many processes started now would, but without a process (and its stack)
  // each; returns when the last byte of all has moved, with each one's finish time. Moves with
  // the same bytes and the same uses (in the same order) are one fluid transfer of that
  // multiplicity, started in the place of the first of them in (chip, core, queue) order:
  // the rates are those of the separate transfers bit for bit (memory::FluidShare), and they
  // finish together. Bytes and load are counted per move, a move of multiplicity m m times
  // (one at a time, as m moves would be). Throws std::invalid_argument for a multiplicity < 1.
  std::vector<Ps> transfer_all(std::vector<Move> moves);

  size_t resources() const { return m_share->resources(); }
  // The resource named `name`; -1 if none.
  int find_resource(const std::string& name) const;
  const std::string& resource_name(int r) const { return m_share->resource_name(r); }
  double resource_capacity(int r) const { return m_share->resource_capacity(r); }
  // Per resource: payload bytes carried, capacity used (bytes x weight), and time with a
  // transfer in flight (up to the last finalize()).
  int64_t bytes(int r) const { return m_res[static_cast<size_t>(r)].bytes; }
  double load(int r) const { return m_res[static_cast<size_t>(r)].load; }
  Ps busy_ps(int r) const { return m_res[static_cast<size_t>(r)].busy_ps; }
  // The least time the capacity resource r gave needs at its full bandwidth.
  sc_core::sc_time floor(int r) const;
  // Samples resource r's rate in GB/s as counter `counter`/`series` of trace process `pid`
  // whenever it changes.
  void trace_rate(int r, traces::TraceSink* trace, int pid, std::string counter,
                  std::string series);
  // Brings busy times up to the current time; call after the simulation.
  void finalize();

 private:
  struct Resource {
    int64_t bytes = 0;
    double load = 0.0;
    Ps busy_ps = 0;
    Ps busy_since = -1;  // when its rate became > 0; -1 while idle
  };
  // Who waits for a transfer: `done` is notified when it finishes, or, with `remaining`,
  // when that count of a transfer_all() reaches 0; `finished` receives the finish time.
  // `set` (folded across chips): the transfer and its mirrors' copies, which must finish
  // together; `chip` the one this one starts for.
  struct Waiter {
    sc_core::sc_event* done = nullptr;
    int* remaining = nullptr;
    Ps* finished = nullptr;
    uint64_t set = 0;
    int chip = 0;
  };
  struct FoldSet {
    TransferKey key;
    int open = 0;
    Ps own = -1;
    std::vector<std::pair<int, Ps>> copies;  // (chip, finish)
  };
  struct Pending {
    TransferKey key;
    uint64_t sequence;
    double bytes;
    std::vector<memory::ResourceUse> uses;
    int64_t multiplicity;
    Waiter waiter;
  };
  struct Traced {
    int resource;
    traces::TraceSink* trace;
    int pid;
    std::string counter, series;
    double last = -1.0;
  };

  void wake();
  // Starts one transfer now; notifies `done` when it finishes (at once if it already has).
  // Returns whether it finished at once.
  bool apply(double bytes, std::vector<memory::ResourceUse> uses, int64_t multiplicity,
             const Waiter& waiter);
  // Records a finish for `w` and notifies its event when its last transfer has finished.
  void finish(const Waiter& w, Ps now);
  // Queues a start for wake() (ordered mode).
  void enqueue(const TransferKey& key, double bytes, std::vector<memory::ResourceUse> uses,
               int64_t multiplicity, const Waiter& waiter);
  void count(double bytes, const std::vector<memory::ResourceUse>& uses);
  // Folded: gives each use its resource's count (throws for a resource counted 0).
  void apply_fold(std::vector<memory::ResourceUse>& uses) const;
  void complete(const std::vector<uint64_t>& done, uint64_t self);
  void after_change(Ps now);
  void reschedule(Ps now);

  std::unique_ptr<memory::BandwidthShare> m_share;
  bool m_ordered;
  std::vector<Resource> m_res;
  std::vector<int64_t> m_fold;  // set_fold's counts; empty when not folded
  std::vector<FoldMap::Mirror> m_mirrors;
  std::map<uint64_t, FoldSet> m_sets;
  uint64_t m_next_set = 1;
  std::optional<std::string> m_mismatch;
  std::vector<Traced> m_traced;
  std::map<uint64_t, Waiter> m_waiting;
  std::vector<Pending> m_pending;
  std::map<std::tuple<int, int, int>, uint64_t> m_sequence;
  sc_core::sc_event m_wake;
};

}  // namespace wallsim::dma
