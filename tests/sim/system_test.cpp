// The system's bandwidth network in closed form: shared chip HBM, engine caps, peer-chip links
// (latency + bytes / bandwidth, max-min shared) and two-hop routes. One System per process.
#include <gtest/gtest.h>

#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <systemc>

#include <functional>
#include <vector>

#include "wallsim/sim/exec.h"
#include "wallsim/sim/simulate.h"
#include "wallsim/sim/system.h"

namespace wallsim::sim {
namespace {

constexpr double kGBps = 1e9;
constexpr int64_t kPsPerNs = 1000;

// A system of `chips` x 1 chips of `cores` cores: HBM 100 GB/s per chip, DMA engines of
// 80 GB/s, NeuronLinks of 10 GB/s with 1000 ns per hop.
SystemConfig small_system(int chips, int cores) {
  SystemConfig s;
  s.chip.cores = cores;
  s.chip.hbm_bytes = int64_t{1} << 30;
  s.chip.hbm_bandwidth_gb_per_s = 100.0;
  s.topology.torus_x = chips;
  s.links.neuronlink = {10.0, 1000};
  return s;
}

ChipConfig small_core() {
  ChipConfig c;
  c.arch.dma.engines = 2;
  c.timing.dma.bandwidth_gb_per_s = 80.0;
  return c;
}

struct Finish {
  int64_t ps = -1;
};

// Starts `bytes` over the named resources at `start_ns` from its own thread, as core
// (chip, core) queue `queue`; records when its last byte moved.
void spawn_transfer(System& sys, int chip, int core, int queue, int64_t start_ns, double bytes,
                    std::vector<std::string> resources, Finish* out) {
  dma::Network& net = sys.network();
  std::vector<memory::ResourceUse> uses;
  for (const auto& r : resources) {
    const int i = net.find_resource(r);
    EXPECT_GE(i, 0) << r;
    uses.push_back({i, 1.0});
  }
  sc_core::sc_spawn([&net, chip, core, queue, start_ns, bytes, uses, out] {
    sc_core::wait(sc_core::sc_time::from_value(static_cast<sc_dt::uint64>(start_ns * kPsPerNs)));
    net.transfer({chip, core, queue}, bytes, uses);
    out->ps = static_cast<int64_t>(sc_core::sc_time_stamp().value());
  });
}

TEST(System, TwoCoresStreamingHbmEachGetHalfTheChip) {
  init_systemc();
  System sys(small_core(), small_system(1, 2), CoreOptions{});
  Finish a, b, alone;
  // Both at 0: each engine could take 80 GB/s, the chip's HBM gives each 100 / 2 = 50 GB/s.
  spawn_transfer(sys, 0, 0, 0, 0, 1e6, {"chip0.core0.dma0", "chip0.hbm"}, &a);
  spawn_transfer(sys, 0, 1, 0, 0, 1e6, {"chip0.core1.dma0", "chip0.hbm"}, &b);
  // Later, alone: bounded by its own engine, 80 GB/s.
  spawn_transfer(sys, 0, 0, 1, 100'000, 1e6, {"chip0.core0.dma1", "chip0.hbm"}, &alone);
  wallsim::sim::simulate();
  EXPECT_EQ(a.ps, int64_t(1e6 / (50 * kGBps) * 1e12));  // 20 us
  EXPECT_EQ(b.ps, a.ps);
  EXPECT_EQ(alone.ps, 100'000 * kPsPerNs + int64_t(1e6 / (80 * kGBps) * 1e12));  // + 12.5 us
}

TEST(System, PeerChipTransferIsLatencyPlusBytesOverTheLinkAndSharesItFairly) {
  init_systemc();
  System sys(small_core(), small_system(2, 1), CoreOptions{});
  const std::vector<LinkId> route = sys.topology()->route(0, 1);
  ASSERT_EQ(route.size(), 1u);
  EXPECT_EQ(route[0].name(), "chip0.x+");
  EXPECT_EQ(sys.topology()->latency_ns(route), 1000);
  const std::vector<std::string> path = {"chip0.core0.dma0", "chip0.hbm", "chip0.x+", "chip1.hbm"};
  Finish idle, first, second;
  // Idle link: 1 MB at 10 GB/s = 100 us, then the hop's 1000 ns.
  spawn_transfer(sys, 0, 0, 0, 0, 1e6, path, &idle);
  // Two at once (on two engines): each gets 5 GB/s, 200 us.
  spawn_transfer(sys, 0, 0, 0, 1'000'000, 1e6, path, &first);
  std::vector<std::string> other = path;
  other[0] = "chip0.core0.dma1";
  spawn_transfer(sys, 0, 0, 1, 1'000'000, 1e6, other, &second);
  wallsim::sim::simulate();
  const int64_t latency_ps = sys.topology()->latency_ns(route) * kPsPerNs;
  EXPECT_EQ(idle.ps + latency_ps, 100'000 * kPsPerNs + 1'000 * kPsPerNs);
  EXPECT_EQ(first.ps, 1'000'000 * kPsPerNs + 200'000 * kPsPerNs);
  EXPECT_EQ(second.ps, first.ps);
  const int link = sys.network().find_resource("chip0.x+");
  EXPECT_EQ(sys.network().bytes(link), 3'000'000);
  sys.network().finalize();
  EXPECT_EQ(sys.network().busy_ps(link), 300'000 * kPsPerNs);
}

TEST(System, TwoHopRouteChargesBothLinks) {
  init_systemc();
  System sys(small_core(), small_system(4, 1), CoreOptions{});
  // 0 -> 2 on a ring of 4: two hops, + on a tie.
  const std::vector<LinkId> route = sys.topology()->route(0, 2);
  ASSERT_EQ(route.size(), 2u);
  EXPECT_EQ(route[0].name(), "chip0.x+");
  EXPECT_EQ(route[1].name(), "chip1.x+");
  EXPECT_EQ(sys.topology()->latency_ns(route), 2000);
  // 3 -> 0 wraps round: one hop.
  EXPECT_EQ(sys.topology()->route(3, 0).size(), 1u);
  // A transfer over the route and one that uses only the second link: the second link is the
  // bottleneck of both, 5 GB/s each; the first link then carries 5 GB/s and stays half free.
  Finish two_hop, one_hop;
  spawn_transfer(sys, 0, 0, 0, 0, 1e6,
                 {"chip0.core0.dma0", "chip0.hbm", "chip0.x+", "chip1.x+", "chip2.hbm"}, &two_hop);
  spawn_transfer(sys, 1, 0, 0, 0, 1e6, {"chip1.core0.dma0", "chip1.hbm", "chip1.x+", "chip2.hbm"},
                 &one_hop);
  wallsim::sim::simulate();
  EXPECT_EQ(two_hop.ps, 200'000 * kPsPerNs);
  EXPECT_EQ(one_hop.ps, 200'000 * kPsPerNs);
  dma::Network& net = sys.network();
  EXPECT_EQ(net.bytes(net.find_resource("chip0.x+")), 1'000'000);
  EXPECT_EQ(net.bytes(net.find_resource("chip1.x+")), 2'000'000);
  EXPECT_EQ(net.bytes(net.find_resource("chip2.x+")), 0);
}

TEST(System, InstancesTalkOverEfaOrTheRing) {
  SystemConfig s = small_system(2, 1);
  s.topology.instances = 2;
  Topology efa(s);
  // Chip 0 (instance 0, x 0) to chip 3 (instance 1, x 1): the x hop, then the NICs.
  std::vector<LinkId> r = efa.route(0, 3);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].name(), "chip0.x+");
  EXPECT_EQ(r[1].name(), "chip1.efa.tx");
  EXPECT_EQ(r[2].name(), "chip3.efa.rx");
  EXPECT_EQ(efa.latency_ns(r), 1000 + s.links.efa.latency_ns);
  s.topology.instance_ring = true;
  Topology ring(s);
  r = ring.route(0, 3);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1].name(), "chip1.ring+");
}

// A collective step's identical moves (same bytes, same uses) are one fluid transfer of their
// multiplicity: they finish when the same moves started as separate transfers would, and the
// resources count every move's bytes.
TEST(System, IdenticalMovesOfATransferAllFinishAsSeparateTransfersWould) {
  init_systemc();
  System sys(small_core(), small_system(2, 2), CoreOptions{});
  dma::Network& net = sys.network();
  const auto use = [&net](const char* name, double weight) {
    const int r = net.find_resource(name);
    EXPECT_GE(r, 0) << name;
    return memory::ResourceUse{r, weight};
  };
  const std::vector<memory::ResourceUse> remote = {use("chip0.hbm", 1.0), use("chip0.x+", 1.0),
                                                   use("chip1.hbm", 1.0)};
  const std::vector<memory::ResourceUse> local = {use("chip0.hbm", 1.3),
                                                  use("chip0.core1.dma1", 1.07)};
  std::vector<dma::Network::Move> moves = {{{0, 1, 7}, 3e5, remote},
                                           {{0, 0, 9}, 3e5, remote},
                                           {{0, 1, 3}, 7e5, local},
                                           {{0, 0, 2}, 3e5, remote}};
  constexpr int64_t kLater = 1'000'000'000;  // ps: the first batch is long over
  std::vector<int64_t> together;
  sc_core::sc_spawn([&] { together = net.transfer_all(moves); });
  std::vector<Finish> apart(moves.size());
  for (size_t i = 0; i < moves.size(); ++i) {
    const dma::Network::Move m = moves[i];
    Finish* out = &apart[i];
    sc_core::sc_spawn([&net, m, out] {
      sc_core::wait(sc_core::sc_time::from_value(static_cast<sc_dt::uint64>(kLater)));
      net.transfer(m.key, m.bytes, m.uses);
      out->ps = static_cast<int64_t>(sc_core::sc_time_stamp().value()) - kLater;
    });
  }
  wallsim::sim::simulate();
  ASSERT_EQ(together.size(), moves.size());
  for (size_t i = 0; i < moves.size(); ++i) EXPECT_EQ(together[i], apart[i].ps) << "move " << i;
  EXPECT_EQ(together[0], together[1]);
  EXPECT_EQ(together[0], together[3]);
  EXPECT_NE(together[0], together[2]);
  EXPECT_EQ(net.bytes(net.find_resource("chip0.x+")), 2 * 3 * 300'000);
  EXPECT_EQ(net.bytes(net.find_resource("chip0.hbm")), 2 * (3 * 300'000 + 700'000));
}

}  // namespace
}  // namespace wallsim::sim
