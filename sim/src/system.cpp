// Elaboration of the system — chips, cores and the bandwidth network — every binding in one place.
#include "wallsim/sim/system.h"

namespace wallsim::sim {

System::System(const ChipConfig& chip, CoreOptions options, const std::string& core_name) {
  const TimingConfig& t = chip.timing;
  // One core: its transfers start in the order its processes run, as they always have.
  m_network = std::make_unique<dma::Network>((core_name + "_network").c_str(), t.hbm.sharing, /*ordered=*/false);
  auto c = std::make_unique<Chip>();
  // Resource order (HBM, host link, then the DMA engines) breaks ties in the sharing policy.
  c->hbm = m_network->add_resource("hbm", t.hbm.bandwidth_gb_per_s * 1e9);
  c->host_link = m_network->add_resource("host_link", t.host_link.bandwidth_gb_per_s * 1e9);
  CoreWiring w;
  w.network = m_network.get();
  w.hbm = c->hbm;
  w.host_link = c->host_link;
  for (int e = 0; e < chip.arch.dma.engines; ++e) {
    w.dma_engines.push_back(
        m_network->add_resource("dma" + std::to_string(e), t.dma.bandwidth_gb_per_s * 1e9));
  }
  w.tensors = &c->tensors;
  m_network->trace_rate(c->hbm, options.trace, w.trace_pid, "HBM bandwidth (GB/s)", "hbm");
  c->cores.push_back(std::make_unique<Core>(core_name.c_str(), chip, options, std::move(w)));
  m_chips.push_back(std::move(c));
}

System::~System() = default;

}  // namespace wallsim::sim
