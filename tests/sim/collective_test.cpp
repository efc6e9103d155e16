// Collectives on the system: each algorithm's time against its alpha-beta closed form on a
// contention-free switch (EFA NICs) and on a NeuronLink ring, functional results against a
// reference, and the one-line reports of ranks that disagree or never arrive. One System per
// process.
#include <gtest/gtest.h>

#include <systemc>

#include <cmath>
#include <deque>
#include <functional>
#include <map>
#include <random>
#include <vector>

#include "wallsim/collectives/plan_maker.h"
#include "wallsim/collectives/schedule.h"
#include "wallsim/memory/memory_error.h"
#include "wallsim/memory/tensor_store.h"
#include "wallsim/sim/exec.h"
#include "wallsim/sim/simulate.h"
#include "wallsim/sim/system.h"

namespace wallsim::sim {
namespace {

using collectives::Algorithm;
using collectives::CollectiveOp;

constexpr double kEfaGBps = 25.0, kReduceGBps = 50.0;
constexpr int64_t kEfaNs = 15000, kStepNs = 200;
// The fixed costs: per collective, per peer of a step, per step across EFA.
constexpr int64_t kLaunchNs = 5000, kHandshakeNs = 300, kProxyNs = 1000;

// `chips` instances of one chip of one core, joined by EFA: every rank has its own NIC in each
// direction, a non-blocking switch between them. HBM is far faster than the NICs.
SystemConfig switch_system(int chips, Algorithm algorithm) {
  SystemConfig s;
  s.chip.cores = 1;
  s.chip.hbm_bytes = int64_t{1} << 30;
  s.chip.hbm_bandwidth_gb_per_s = 1e6;
  s.topology.instances = chips;
  s.links.efa = {kEfaGBps, kEfaNs};
  s.collectives.algorithm = algorithm;
  s.collectives.reduce_gb_per_s = kReduceGBps;
  s.collectives.step_overhead_ns = kStepNs;
  s.collectives.launch_ns = kLaunchNs;
  s.collectives.handshake_ns = kHandshakeNs;
  s.collectives.network_proxy_ns = kProxyNs;
  s.collectives.ring_directions = 2;  // both ring directions share a rank's NIC: same beta
  return s;
}

ChipConfig small_core() {
  ChipConfig c;
  c.arch.dma.engines = 2;
  return c;
}

std::vector<std::pair<int, int>> first_ranks(int p) {
  std::vector<std::pair<int, int>> r;
  for (int c = 0; c < p; ++c) r.emplace_back(c, 0);
  return r;
}

// Launches, on cores [0, 0] .. [p-1, 0] for each p of `sizes` in turn, one collective of `op`
// on p ranks with a size of `count` fp32 elements. Plans live in `plans`.
void launch_each_size(System& sys, std::deque<isa::Plan>& plans, CollectiveOp op, int64_t count,
                      const std::vector<int>& sizes) {
  for (int p : sizes) {
    plans.push_back(collectives::collective_plan(op, p, count, isa::DType::fp32));
    for (int r = 0; r < p; ++r) {
      engines::Launch& l = sys.core(static_cast<size_t>(r)).launch(plans.back(), {});
      l.comm_ranks = {first_ranks(p)};
    }
  }
}

// Each collective's simulated time (last arrival to end) within 2 % of its closed form.
void expect_closed_forms(CollectiveOp op, Algorithm algorithm, const std::vector<int>& sizes) {
  init_systemc();
  const int chips = sizes.back();
  System sys(small_core(), switch_system(chips, algorithm), CoreOptions{});
  std::deque<isa::Plan> plans;
  const int64_t count = 960 * 1024;  // divides by every size tested
  launch_each_size(sys, plans, op, count, sizes);
  wallsim::sim::simulate();
  const auto& records = sys.collectives()->records();
  ASSERT_EQ(records.size(), sizes.size());
  collectives::AlphaBeta ab;
  ab.alpha_s = double(kEfaNs + kStepNs + kProxyNs) * 1e-9;
  ab.beta_s_per_byte = 1.0 / (kEfaGBps * 1e9);
  ab.gamma_s_per_byte = 1.0 / (kReduceGBps * 1e9);
  ab.handshake_s = double(kHandshakeNs) * 1e-9;
  ab.ring_directions = 2;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const auto& r = records[i];
    const int p = sizes[i];
    EXPECT_EQ(r.ranks, p);
    EXPECT_EQ(r.algorithm, algorithm == Algorithm::rhd && op == CollectiveOp::all_to_all
                               ? Algorithm::ring
                               : algorithm);
    const double n = double(count) * 4;
    EXPECT_EQ(r.bytes, n);
    const double simulated = double(r.end_ps - r.ready_ps) * 1e-12;
    const double expected =
        collectives::closed_form_seconds(op, r.algorithm, p, n, ab, double(kLaunchNs) * 1e-9);
    // The issue asks for 2 %; with no contention the model is the closed form to rounding.
    EXPECT_NEAR(simulated / expected, 1.0, 1e-4)
        << name_of(op) << " " << name_of(algorithm) << " p=" << p << ": simulated " << simulated
        << " s, closed form " << expected << " s";
  }
}

const std::vector<int> kAnySize = {2, 3, 4, 5, 8, 16, 32, 64};
const std::vector<int> kPowersOfTwo = {2, 4, 8, 16, 32, 64};
// A mesh step of 64 ranks starts 4032 transfers on one connected component of the network:
// seconds of simulation each, so only the all-reduce goes to 64.
const std::vector<int> kMeshSizes = {2, 3, 4, 5, 8, 16, 32};

TEST(CollectiveClosedForm, RingAllReduce) {
  expect_closed_forms(CollectiveOp::all_reduce, Algorithm::ring, kAnySize);
}
TEST(CollectiveClosedForm, MeshAllReduce) {
  expect_closed_forms(CollectiveOp::all_reduce, Algorithm::mesh, kAnySize);
}
TEST(CollectiveClosedForm, RhdAllReduce) {
  expect_closed_forms(CollectiveOp::all_reduce, Algorithm::rhd, kPowersOfTwo);
}
TEST(CollectiveClosedForm, RingAllGather) {
  expect_closed_forms(CollectiveOp::all_gather, Algorithm::ring, kAnySize);
}
TEST(CollectiveClosedForm, MeshAllGather) {
  expect_closed_forms(CollectiveOp::all_gather, Algorithm::mesh, kMeshSizes);
}
TEST(CollectiveClosedForm, RhdAllGather) {
  expect_closed_forms(CollectiveOp::all_gather, Algorithm::rhd, kPowersOfTwo);
}
TEST(CollectiveClosedForm, RingReduceScatter) {
  expect_closed_forms(CollectiveOp::reduce_scatter, Algorithm::ring, kAnySize);
}
TEST(CollectiveClosedForm, MeshReduceScatter) {
  expect_closed_forms(CollectiveOp::reduce_scatter, Algorithm::mesh, kMeshSizes);
}
TEST(CollectiveClosedForm, RhdReduceScatter) {
  expect_closed_forms(CollectiveOp::reduce_scatter, Algorithm::rhd, kPowersOfTwo);
}
TEST(CollectiveClosedForm, PairwiseAllToAll) {
  expect_closed_forms(CollectiveOp::all_to_all, Algorithm::ring, kAnySize);
}
TEST(CollectiveClosedForm, MeshAllToAll) {
  expect_closed_forms(CollectiveOp::all_to_all, Algorithm::mesh, kMeshSizes);
}
TEST(CollectiveClosedForm, Permute) {
  expect_closed_forms(CollectiveOp::permute, Algorithm::mesh, kAnySize);
}

// On a NeuronLink ring of 8 chips (torus 8 x 1), rank r's neighbours r + 1 and r - 1 are one
// hop away on their own links: ring all-reduce is 2(p-1) steps of (hop latency + handshakes +
// n/p over one link, or n/(2p) over each of two with two directions).
void expect_ring_on_neuronlink_ring(int directions) {
  init_systemc();
  SystemConfig s = switch_system(1, Algorithm::ring);
  s.topology.instances = 1;
  s.topology.torus_x = 8;
  s.links.neuronlink = {100.0, 1500};
  s.collectives.ring_directions = directions;
  System sys(small_core(), s, CoreOptions{});
  std::deque<isa::Plan> plans;
  const int64_t count = 1 << 20;
  launch_each_size(sys, plans, CollectiveOp::all_reduce, count, {8});
  wallsim::sim::simulate();
  ASSERT_EQ(sys.collectives()->records().size(), 1u);
  const auto& r = sys.collectives()->records()[0];
  collectives::AlphaBeta ab{double(1500 + kStepNs) * 1e-9, 1.0 / (100e9 * directions),
                            1.0 / (kReduceGBps * 1e9), double(kHandshakeNs) * 1e-9, directions};
  const double expected = collectives::closed_form_seconds(
      CollectiveOp::all_reduce, Algorithm::ring, 8, count * 4.0, ab, double(kLaunchNs) * 1e-9);
  EXPECT_NEAR(double(r.end_ps - r.ready_ps) * 1e-12 / expected, 1.0, 0.02);
  // Every link carried 2(p-1) chunks of n/p, in one direction, or half of it in each.
  sys.finalize();
  const int x_plus = sys.network().find_resource("chip3.x+");
  const int x_minus = sys.network().find_resource("chip3.x-");
  const int64_t total = 2 * 7 * (count * 4 / 8);
  EXPECT_EQ(sys.network().bytes(x_plus), total / directions);
  EXPECT_EQ(sys.network().bytes(x_minus), directions == 2 ? total / 2 : 0);
}

TEST(CollectiveClosedForm, RingAllReduceOnANeuronLinkRing) { expect_ring_on_neuronlink_ring(1); }
TEST(CollectiveClosedForm, TwoRingsOnANeuronLinkRing) { expect_ring_on_neuronlink_ring(2); }

// Two ranks on one chip: no link, HBM far faster; their copies share the chip's collective DMA
// (3 cores x 2 engines x the core's DMA engine rate): beta per rank = 2 / that rate.
TEST(CollectiveClosedForm, SameChipAllReduceIsBoundByTheCollectiveDma) {
  init_systemc();
  SystemConfig s = switch_system(1, Algorithm::ring);
  s.chip.cores = 2;
  s.collectives.cores_per_chip = 3;
  s.collectives.dma_rings_per_core = 2;
  const ChipConfig core = small_core();
  System sys(core, s, CoreOptions{});
  std::deque<isa::Plan> plans;
  const int64_t count = 1 << 20;
  plans.push_back(
      collectives::collective_plan(CollectiveOp::all_reduce, 2, count, isa::DType::fp32));
  for (int r = 0; r < 2; ++r) {
    sys.core(0, static_cast<size_t>(r)).launch(plans.back(), {}).comm_ranks = {{{0, 0}, {0, 1}}};
  }
  wallsim::sim::simulate();
  ASSERT_EQ(sys.collectives()->records().size(), 1u);
  const auto& r = sys.collectives()->records()[0];
  const double rate = 3 * 2 * core.timing.dma.bandwidth_gb_per_s * 1e9;
  collectives::AlphaBeta ab{double(kStepNs) * 1e-9, 2.0 / rate, 1.0 / (kReduceGBps * 1e9),
                            double(kHandshakeNs) * 1e-9, 2};
  const double expected = collectives::closed_form_seconds(
      CollectiveOp::all_reduce, Algorithm::ring, 2, count * 4.0, ab, double(kLaunchNs) * 1e-9);
  EXPECT_NEAR(double(r.end_ps - r.ready_ps) * 1e-12 / expected, 1.0, 0.02);
  EXPECT_EQ(r.bound_by, "chip0.cc_dma");
}

// ---- functional results ----

// The reference: double-precision reductions, plain loops.
std::vector<std::vector<double>> reference(CollectiveOp op,
                                           const std::vector<std::vector<float>>& in) {
  const size_t p = in.size(), n = in[0].size();
  std::vector<std::vector<double>> out(p);
  std::vector<double> sum(n, 0.0);
  for (const auto& x : in) {
    for (size_t i = 0; i < n; ++i) sum[i] += x[i];
  }
  for (size_t r = 0; r < p; ++r) {
    switch (op) {
      case CollectiveOp::all_reduce:
        out[r] = sum;
        break;
      case CollectiveOp::all_gather:
        for (size_t j = 0; j < p; ++j) out[r].insert(out[r].end(), in[j].begin(), in[j].end());
        break;
      case CollectiveOp::reduce_scatter:
        out[r].assign(sum.begin() + r * (n / p), sum.begin() + (r + 1) * (n / p));
        break;
      case CollectiveOp::all_to_all:
        for (size_t j = 0; j < p; ++j)
          out[r].insert(out[r].end(), in[j].begin() + r * (n / p),
                        in[j].begin() + (r + 1) * (n / p));
        break;
      case CollectiveOp::permute:
        out[r].assign(in[(r + p - 1) % p].begin(), in[(r + p - 1) % p].end());
        break;
      case CollectiveOp::send_recv:
        break;
    }
  }
  return out;
}

// Runs `op` functionally on 2 ranks (chips 0, 1) and on 8 (chips 0..7), each rank's source
// seeded differently, and compares every rank's destination with the reference.
void expect_functional(CollectiveOp op, Algorithm algorithm) {
  init_systemc();
  CoreOptions options;
  options.functional = true;
  System sys(small_core(), switch_system(8, algorithm), options);
  const int64_t count = 8 * 96;
  std::deque<isa::Plan> plans;
  std::map<std::pair<int, int>, std::vector<float>> inputs;  // (p, rank) -> source
  for (int p : {2, 8}) {
    isa::Plan plan = collectives::collective_plan(op, p, count, isa::DType::fp32);
    for (auto& t : plan.tensors) t.name += std::to_string(p);  // one chip holds both runs' tensors
    plans.push_back(plan);
    for (int r = 0; r < p; ++r) {
      memory::TensorStore& store = sys.chip(static_cast<size_t>(r)).tensors;
      for (const auto& t : plans.back().tensors) store.put(t.name, t.space, t.dtype, t.shape);
      memory::TensorStore::Tensor& src = *store.find("src" + std::to_string(p));
      memory::fill_random(src, 1000 * p + r);
      inputs[{p, r}] = memory::to_floats(src);
      engines::Launch& l = sys.core(static_cast<size_t>(r)).launch(plans.back(), {});
      l.comm_ranks = {first_ranks(p)};
    }
  }
  wallsim::sim::simulate();
  for (size_t c = 0; c < 8; ++c) ASSERT_FALSE(sys.core(c).error()) << *sys.core(c).error();
  for (int p : {2, 8}) {
    std::vector<std::vector<float>> in;
    for (int r = 0; r < p; ++r) in.push_back(inputs[{p, r}]);
    const auto want = reference(op, in);
    for (int r = 0; r < p; ++r) {
      const auto got = memory::to_floats(
          *sys.chip(static_cast<size_t>(r)).tensors.find("dst" + std::to_string(p)));
      ASSERT_EQ(got.size(), want[r].size());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], want[r][i], 1e-5 * (1 + std::fabs(want[r][i])))
            << name_of(op) << " p=" << p << " rank " << r << " element " << i;
      }
    }
  }
}

TEST(CollectiveFunctional, AllReduceMatchesTheReferenceOn2And8Ranks) {
  expect_functional(CollectiveOp::all_reduce, Algorithm::automatic);
}
TEST(CollectiveFunctional, AllGatherMatchesTheReferenceOn2And8Ranks) {
  expect_functional(CollectiveOp::all_gather, Algorithm::ring);
}
TEST(CollectiveFunctional, ReduceScatterMatchesTheReferenceOn2And8Ranks) {
  expect_functional(CollectiveOp::reduce_scatter, Algorithm::rhd);
}
TEST(CollectiveFunctional, AllToAllMatchesTheReferenceOn2And8Ranks) {
  expect_functional(CollectiveOp::all_to_all, Algorithm::mesh);
}
TEST(CollectiveFunctional, PermuteMatchesTheReferenceOn2And8Ranks) {
  expect_functional(CollectiveOp::permute, Algorithm::automatic);
}

TEST(CollectiveFunctional, RecvGetsTheMatchingSend) {
  init_systemc();
  CoreOptions options;
  options.functional = true;
  System sys(small_core(), switch_system(2, Algorithm::automatic), options);
  const isa::Plan send = collectives::collective_plan(CollectiveOp::send_recv, 2, 300,
                                                      isa::DType::bf16, /*peer=*/1, false);
  const isa::Plan recv = collectives::collective_plan(CollectiveOp::send_recv, 2, 300,
                                                      isa::DType::bf16, /*peer=*/0, true);
  for (int r = 0; r < 2; ++r) {
    for (const auto& t : send.tensors) sys.chip(r).tensors.put(t.name, t.space, t.dtype, t.shape);
  }
  memory::fill_random(*sys.chip(0).tensors.find("src"), 7);
  sys.core(0).launch(send, {}).comm_ranks = {first_ranks(2)};
  sys.core(1).launch(recv, {}).comm_ranks = {first_ranks(2)};
  wallsim::sim::simulate();
  EXPECT_EQ(memory::to_floats(*sys.chip(1).tensors.find("dst")),
            memory::to_floats(*sys.chip(0).tensors.find("src")));
  ASSERT_EQ(sys.collectives()->records().size(), 1u);
  const auto& r = sys.collectives()->records()[0];
  // latency + 600 bytes over the NICs, plus the launch and one step's fixed costs.
  EXPECT_EQ(r.end_ps - r.ready_ps, (kLaunchNs + kEfaNs + kStepNs + kHandshakeNs + kProxyNs) * 1000 +
                                       int64_t(600 / kEfaGBps * 1000));
}

// ---- ranks that disagree or never arrive ----

TEST(CollectiveReports, RanksIssuingDifferentCollectivesStopWithOneLine) {
  init_systemc();
  System sys(small_core(), switch_system(2, Algorithm::automatic), CoreOptions{});
  const isa::Plan a =
      collectives::collective_plan(CollectiveOp::all_reduce, 2, 64, isa::DType::fp32);
  const isa::Plan b =
      collectives::collective_plan(CollectiveOp::all_gather, 2, 64, isa::DType::fp32);
  sys.core(0).launch(a, {}).comm_ranks = {first_ranks(2)};
  sys.core(1).launch(b, {}).comm_ranks = {first_ranks(2)};
  wallsim::sim::simulate();
  const auto e0 = sys.core(0).error(), e1 = sys.core(1).error();
  ASSERT_TRUE(e0 || e1);
  const std::string e = e0 ? *e0 : *e1;
  EXPECT_NE(e.find("communicator 'world' collective 0: rank "), std::string::npos) << e;
  EXPECT_NE(e.find("all_gather of 128 bytes fp32"), std::string::npos) << e;
  EXPECT_NE(e.find("all_reduce of 256 bytes fp32 (add)"), std::string::npos) << e;
}

TEST(CollectiveReports, ARankThatNeverArrivesIsNamedNotHung) {
  init_systemc();
  System sys(small_core(), switch_system(4, Algorithm::automatic), CoreOptions{});
  const isa::Plan a =
      collectives::collective_plan(CollectiveOp::all_reduce, 4, 64, isa::DType::fp32);
  for (int r : {0, 1, 3})
    sys.core(static_cast<size_t>(r)).launch(a, {}).comm_ranks = {first_ranks(4)};
  wallsim::sim::simulate();  // returns: nothing is left to happen
  EXPECT_FALSE(sys.core(0).all_drained());
  const auto report = sys.collectives()->stuck_report();
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0],
            "communicator 'world' collective 0 (all_reduce): ranks 0 [0, 0], 1 [1, 0], 3 [3, 0] "
            "of 4 arrived; never: 2 [2, 0]");
}

}  // namespace
}  // namespace wallsim::sim
