// ASTRA-sim's analytical network, system and remote-memory configurations from a wallsim system.
#include "wallsim/chakra/astra_configs.h"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "wallsim/traces/write_error.h"

namespace wallsim::chakra {

namespace {

std::string algorithm_name(collectives::Algorithm a) {
  switch (a) {
    case collectives::Algorithm::mesh:
      return "direct";
    case collectives::Algorithm::rhd:
      return "halvingDoubling";
    default:
      return "ring";  // ring; automatic: ASTRA-sim cannot switch by size
  }
}

std::ofstream open(const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw traces::WriteError(path, traces::errno_reason(errno));
  return out;
}

double chip_hbm_gb_per_s(const sim::SystemConfig& s, const sim::ChipConfig& core) {
  return s.chip.hbm_bandwidth_gb_per_s > 0
             ? s.chip.hbm_bandwidth_gb_per_s
             : core.timing.hbm.bandwidth_gb_per_s * double(s.chip.cores);
}

}  // namespace

NetworkDims network_dims(const sim::SystemConfig& s, const sim::ChipConfig& core, int64_t world) {
  const double c = double(s.chip.cores);
  const auto& nl = s.links.neuronlink;
  const auto& between = s.topology.instance_ring ? s.links.instance_ring : s.links.efa;
  const NetworkDims all = {{"FullyConnected", s.chip.cores, chip_hbm_gb_per_s(s, core) / (2 * c),
                            double(s.collectives.step_overhead_ns), "cores"},
                           {"Ring", s.topology.torus_x, nl.effective_bandwidth_gb_per_s() / c,
                            double(nl.effective_latency_ns()), "torus x"},
                           {"Ring", s.topology.torus_y, nl.effective_bandwidth_gb_per_s() / c,
                            double(nl.effective_latency_ns()), "torus y"},
                           {s.topology.instance_ring ? "Ring" : "Switch", s.topology.instances,
                            between.effective_bandwidth_gb_per_s() / c,
                            double(between.effective_latency_ns()), "instances"}};
  NetworkDims dims;
  int64_t product = 1;
  for (NetworkDim d : all) {
    if (d.npus <= 1 || product >= world) continue;
    // The ranks fill part of the last dimension they reach (chips of a torus row the run does
    // not use): a smaller ring of the same links, when it divides them evenly.
    if (product * d.npus > world && world % product == 0) d.npus = world / product;
    dims.push_back(d);
    product *= d.npus;
  }
  if (product == world) return dims;
  // A partial last dimension: one switch over every rank at the slowest link.
  NetworkDim slowest = dims.empty() ? all[0] : dims[0];
  for (const NetworkDim& d : dims) {
    if (d.bandwidth_gb_per_s < slowest.bandwidth_gb_per_s) slowest = d;
  }
  double latency = 0;
  for (const NetworkDim& d : dims) latency = std::max(latency, d.latency_ns);
  return {{"Switch", world, slowest.bandwidth_gb_per_s, latency, "all ranks"}};
}

void write_astra_configs(const std::string& dir, const std::string& name,
                         const sim::SystemConfig& s, const sim::ChipConfig& core,
                         const NetworkDims& dims, int64_t world) {
  std::ostringstream topology, npus, bandwidth, latency;
  topology << "topology: [ ";
  npus << "npus_count: [ ";
  bandwidth << "bandwidth: [ ";
  latency << "latency: [ ";
  for (size_t i = 0; i < dims.size(); ++i) {
    const char* sep = i + 1 < dims.size() ? ", " : " ]";
    topology << dims[i].topology << sep;
    npus << dims[i].npus << sep;
    bandwidth << std::setprecision(12) << dims[i].bandwidth_gb_per_s << sep;
    latency << std::setprecision(12) << dims[i].latency_ns << sep;
  }
  std::string what;
  for (const NetworkDim& d : dims) what += (what.empty() ? "" : ", ") + d.what;
  open(dir + "/network.yml") << "# ASTRA-sim analytical network from the wallsim config: dims "
                             << what << " (" << world << " NPUs = ranks 0.." << world - 1 << ")\n"
                             << topology.str() << "\n"
                             << npus.str() << "\n"
                             << bandwidth.str() << "   # GB/s\n"
                             << latency.str() << "   # ns\n";

  const std::vector<std::string> algo(dims.size(), algorithm_name(s.collectives.algorithm));
  nlohmann::ordered_json sys = {{"scheduling-policy", "FIFO"},
                                {"endpoint-delay", 0},
                                {"active-chunks-per-dimension", 1},
                                {"preferred-dataset-splits", 4},
                                {"all-reduce-implementation", algo},
                                {"all-gather-implementation", algo},
                                {"reduce-scatter-implementation", algo},
                                {"all-to-all-implementation", algo},
                                {"collective-optimization", "localBWAware"},
                                {"local-mem-bw", chip_hbm_gb_per_s(s, core) / double(s.chip.cores)},
                                {"boost-mode", 0},
                                {"roofline-enabled", 0}};
  open(dir + "/system.json") << sys.dump(2) << "\n";

  // One host link per chip, each serving its cores' transfers one at a time.
  const int64_t per_node = std::min<int64_t>(s.chip.cores, world);
  const auto& host = core.timing.host_link;
  nlohmann::ordered_json mem = {
      {"memory-type", "PER_NODE_MEMORY_EXPANSION"},
      {"num-nodes", (world + per_node - 1) / per_node},
      {"num-npus-per-node", per_node},
      {"remote-mem-latency", std::max<int64_t>(1, host.latency_ns)},
      {"remote-mem-bw", std::max<int64_t>(1, static_cast<int64_t>(host.bandwidth_gb_per_s + 0.5))}};
  open(dir + "/remote_memory.json") << mem.dump(2) << "\n";

  open(dir + "/README.md") << "# Chakra traces of a wallsim run\n\n"
                           << "Replay with ASTRA-sim's analytical backend (docs/CHAKRA.md in "
                              "wallsim), from this folder:\n\n"
                           << "    AstraSim_Analytical_Congestion_Unaware --workload-configuration="
                           << name << " \\\n"
                           << "      --comm-group-configuration=" << name << ".comm_groups.json"
                           << " --system-configuration=system.json \\\n"
                           << "      --network-configuration=network.yml"
                           << " --remote-memory-configuration=remote_memory.json\n";
}

}  // namespace wallsim::chakra
