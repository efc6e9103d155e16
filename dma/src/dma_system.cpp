// DMA engines, HBM and host link: descriptor issue, fair-shared transfers, functional copies.
#include "wallsim/dma/dma_system.h"

#include <algorithm>
#include <cmath>

namespace wallsim::dma {

using isa::MemSpace;
using isa::Opcode;
using sc_core::sc_time;

namespace {

sc_time ns(int64_t v) { return sc_time::from_value(static_cast<sc_dt::uint64>(v) * 1000u); }

std::vector<int64_t> row_indices(const memory::Tile& index) {
  std::vector<int64_t> rows(static_cast<size_t>(index.size()));
  for (Eigen::Index i = 0; i < index.size(); ++i) rows[i] = std::llround(index.data()[i]);
  return rows;
}

void copy_functional(const isa::Instruction& in, const memory::MemoryMap& mem) {
  memory::Tile data, index;
  switch (in.op) {
    case Opcode::dma_copy: {
      memory::read_tile(mem, in.src[0], data);
      // Elements move in iteration order; the two sides may group them differently.
      memory::Tile shaped =
          Eigen::Map<memory::Tile>(data.data(), in.dst.partitions, in.dst.free_elements());
      memory::write_tile(mem, in.dst, shaped);
      break;
    }
    case Opcode::dma_gather:
      memory::read_tile(mem, in.src[1], index);
      memory::read_rows(mem, in.src[0], row_indices(index), data);
      memory::write_tile(mem, in.dst, data);
      break;
    case Opcode::dma_scatter:
      memory::read_tile(mem, in.src[1], index);
      memory::read_tile(mem, in.src[0], data);
      memory::write_rows(mem, in.dst, row_indices(index), data);
      break;
    default:
      throw memory::MemoryError("a compute instruction was issued to a DMA queue");
  }
}

}  // namespace

DmaSystem::DmaSystem(sc_core::sc_module_name name, const DmaTiming& dma,
                     const memory::HbmTiming& hbm, const HostLinkTiming& link, DmaWiring wiring,
                     traces::StatsRegistry* stats, std::string scope)
    : sc_module(name),
      m_dma(dma),
      m_hbm_timing(hbm),
      m_link_timing(link),
      m_net(*wiring.network),
      m_key{wiring.chip, wiring.core, 0},
      m_hbm(wiring.hbm),
      m_link(wiring.host_link),
      m_engines(std::move(wiring.engines)),
      m_remote(std::move(wiring.remote)),
      m_stats(stats),
      m_scope(std::move(scope)) {
  if (m_stats) {
    traces::StatsScope d(*m_stats, m_scope);
    m_hbm_read = &d.add_counter("hbm.read_bytes", "bytes",
                                "bytes read from HBM (DMA and instruction fetch)");
    m_hbm_write = &d.add_counter("hbm.write_bytes", "bytes", "bytes written to HBM");
    m_link_bytes = &d.add_counter("host_link.bytes", "bytes", "bytes moved over the host link");
    m_descriptors = &d.add_counter("dma.descriptors", "", "DMA descriptors executed");
    m_chunks = &d.add_counter("dma.chunks", "", "contiguous chunks moved by DMA descriptors");
    m_transposes =
        &d.add_counter("dma.transposes", "", "descriptors that transpose 2-byte elements");
  }
}

int64_t DmaSystem::bytes_moved(const isa::Instruction& in) {
  // Gathers and scatters move the rows named by the index; a copy moves its destination.
  return in.op == Opcode::dma_scatter ? in.src[0].bytes() : in.dst.bytes();
}

sc_time DmaSystem::execute(const isa::Instruction& in, int engine, const memory::MemoryMap* mem,
                           QueueIssue& queue_issue, bool back_to_back, int queue,
                           const isa::Plan* plan) {
  if (m_descriptors) ++*m_descriptors;
  const sc_time issue = ns(m_dma.descriptor_issue_ns), now = sc_core::sc_time_stamp();
  if (m_dma.issue_overlaps_transfer && back_to_back && queue_issue.any) {
    // Generated right after its predecessor's, during that one's transfer.
    const sc_time generated = queue_issue.generated + issue;
    if (generated > now) sc_core::wait(generated - now);
    queue_issue.generated = generated;
  } else {
    sc_core::wait(issue);
    queue_issue.generated = now + issue;
  }
  queue_issue.any = true;
  if (mem) copy_functional(in, *mem);
  const DescriptorCost c = descriptor_cost(in, m_dma, m_hbm_timing, m_link_timing);
  std::vector<memory::ResourceUse> uses;
  uses.reserve(3);
  uses.push_back({m_engines.at(static_cast<size_t>(engine)), c.engine_weight});
  if (c.hbm_weight > 0) uses.push_back({m_hbm, c.hbm_weight});
  if (c.link_weight > 0) uses.push_back({m_link, c.link_weight});
  if (m_hbm_read) *m_hbm_read += static_cast<uint64_t>(c.hbm_read_bytes);
  if (m_hbm_write) *m_hbm_write += static_cast<uint64_t>(c.hbm_write_bytes);
  if (m_link_bytes) *m_link_bytes += static_cast<uint64_t>(c.link_bytes);
  if (m_chunks) *m_chunks += static_cast<uint64_t>(c.chunks);
  if (m_transposes && c.transpose) ++*m_transposes;
  const int64_t remote_ns = plan && !m_remote.empty() ? route_remote(in, *plan, uses) : 0;
  transfer(static_cast<double>(c.bytes), std::move(uses), queue);
  return ns(c.latency_ns + remote_ns);
}

int64_t DmaSystem::route_remote(const isa::Instruction& in, const isa::Plan& plan,
                                std::vector<memory::ResourceUse>& uses) const {
  int64_t latency = 0;
  for (const isa::AccessPattern* ap : {&in.src[0], &in.dst}) {
    if (ap->space != MemSpace::hbm) continue;
    const std::string_view name = plan.target_name(*ap);
    if (name.rfind("chip", 0) != 0) continue;
    const size_t colon = name.find(':');
    if (colon == std::string_view::npos || colon == 4) continue;
    int chip = 0;
    for (size_t i = 4; i < colon; ++i) {
      if (name[i] < '0' || name[i] > '9') return latency;
      chip = chip * 10 + (name[i] - '0');
      if (chip >= static_cast<int>(m_remote.size())) {
        throw memory::MemoryError("tensor '" + std::string(name) + "' names chip " +
                                  std::to_string(chip) + "; the system has " +
                                  std::to_string(m_remote.size()));
      }
    }
    if (chip == m_key.chip) continue;
    const RemoteHbm& r = m_remote[static_cast<size_t>(chip)];
    for (memory::ResourceUse& u : uses) {
      if (u.resource == m_hbm) u.weight -= 1.0;  // this end's byte no longer touches local HBM
    }
    uses.push_back({r.hbm, 1.0});
    for (int link : r.links) uses.push_back({link, 1.0});
    latency += r.latency_ns;
  }
  uses.erase(std::remove_if(uses.begin(), uses.end(),
                            [](const memory::ResourceUse& u) { return !(u.weight > 1e-12); }),
             uses.end());
  return latency;
}

void DmaSystem::fetch_from_hbm(int64_t bytes) {
  if (m_hbm_read) *m_hbm_read += static_cast<uint64_t>(bytes);
  transfer(static_cast<double>(bytes), {{m_hbm, 1.0}}, -1);
  sc_core::wait(ns(m_hbm_timing.latency_ns));
}

void DmaSystem::transfer(double bytes, std::vector<memory::ResourceUse> uses, int queue) {
  TransferKey key = m_key;
  key.queue = queue;
  m_net.transfer(key, bytes, std::move(uses));
}

std::vector<std::pair<std::string, sc_time>> DmaSystem::transfer_floors() const {
  std::vector<std::pair<std::string, sc_time>> out;
  const auto add = [&](const std::string& name, int r) {
    if (m_net.bytes(r) != 0) out.emplace_back(name, m_net.floor(r));
  };
  add("hbm", m_hbm);
  add("host_link", m_link);
  for (size_t e = 0; e < m_engines.size(); ++e) add("dma" + std::to_string(e), m_engines[e]);
  return out;
}

void DmaSystem::finalize(sc_time elapsed) {
  if (!m_stats) return;
  traces::StatsScope d(*m_stats, m_scope);
  const double seconds = elapsed.to_seconds();
  const double hbm_bytes =
      double(m_hbm_read ? m_hbm_read->value() : 0) + double(m_hbm_write ? m_hbm_write->value() : 0);
  d.add_value("hbm.busy_ns", "ns", "time with at least one HBM transfer in flight")
      .set(double(m_net.busy_ps(m_hbm)) / 1e3);
  d.add_value("hbm.achieved_gb_per_s", "GB/s", "HBM bytes read and written / device time")
      .set(seconds > 0 ? hbm_bytes / seconds / 1e9 : 0.0);
  d.add_value("host_link.busy_ns", "ns", "time with at least one host-link transfer in flight")
      .set(double(m_net.busy_ps(m_link)) / 1e3);
  for (size_t e = 0; e < m_engines.size(); ++e) {
    const int r = m_engines[e];
    if (m_net.bytes(r) == 0) continue;  // idle engines stay out of the report
    traces::StatsScope s = d.scope("dma.engines.e" + std::to_string(e));
    s.add_value("bytes", "bytes", "bytes moved by this DMA engine").set(m_net.bytes(r));
    s.add_value("busy_ns", "ns", "time with at least one transfer in flight")
        .set(double(m_net.busy_ps(r)) / 1e3);
  }
}

}  // namespace wallsim::dma
