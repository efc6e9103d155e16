// DMA engines, HBM and host link: descriptor issue, fair-shared transfers, functional copies.
#include "wallsim/dma/dma_system.h"

#include <cmath>

namespace wallsim::dma {

using isa::MemSpace;
using isa::Opcode;
using sc_core::sc_time;

namespace {

sc_time ns(int64_t v) { return sc_time::from_value(static_cast<sc_dt::uint64>(v) * 1000u); }
FluidShare::Ps now_ps() { return static_cast<FluidShare::Ps>(sc_core::sc_time_stamp().value()); }

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

DmaSystem::DmaSystem(sc_core::sc_module_name name, int engines, const DmaTiming& dma,
                     const memory::HbmTiming& hbm, const HostLinkTiming& link,
                     traces::StatsRegistry* stats, traces::TraceSink* trace, int trace_pid)
    : sc_module(name),
      m_dma(dma),
      m_hbm_timing(hbm),
      m_link_timing(link),
      m_stats(stats),
      m_trace(trace),
      m_trace_pid(trace_pid) {
  SC_HAS_PROCESS(DmaSystem);
  SC_METHOD(wake);
  sensitive << m_wake;
  dont_initialize();
  m_hbm = m_share.add_resource("hbm", hbm.bandwidth_gb_per_s * 1e9);
  m_link = m_share.add_resource("host_link", link.bandwidth_gb_per_s * 1e9);
  for (int e = 0; e < engines; ++e) {
    m_engines.push_back(
        m_share.add_resource("dma" + std::to_string(e), dma.bandwidth_gb_per_s * 1e9));
  }
  m_busy_ps.assign(m_share.resources(), 0);
  m_bytes.assign(m_share.resources(), 0);
  if (m_stats) {
    traces::StatsScope d(*m_stats, "device");
    m_hbm_read = &d.add_counter("hbm.read_bytes", "bytes",
                                "bytes read from HBM (DMA and instruction fetch)");
    m_hbm_write = &d.add_counter("hbm.write_bytes", "bytes", "bytes written to HBM");
    m_link_bytes = &d.add_counter("host_link.bytes", "bytes", "bytes moved over the host link");
    m_descriptors = &d.add_counter("dma.descriptors", "", "DMA descriptors executed");
  }
}

int64_t DmaSystem::bytes_moved(const isa::Instruction& in) {
  // Gathers and scatters move the rows named by the index; a copy moves its destination.
  return in.op == Opcode::dma_scatter ? in.src[0].bytes() : in.dst.bytes();
}

sc_time DmaSystem::execute(const isa::Instruction& in, int engine, const memory::MemoryMap* mem) {
  if (m_descriptors) ++*m_descriptors;
  sc_core::wait(ns(m_dma.descriptor_issue_ns));
  if (mem) copy_functional(in, *mem);
  const int64_t bytes = bytes_moved(in);
  const MemSpace src = in.src[0].space, dst = in.dst.space;
  std::vector<int> resources{m_engines.at(static_cast<size_t>(engine))};
  int64_t latency_ns = 0;
  if (src == MemSpace::hbm || dst == MemSpace::hbm) {
    resources.push_back(m_hbm);
    latency_ns += m_hbm_timing.latency_ns;
    if (src == MemSpace::hbm && m_hbm_read) *m_hbm_read += static_cast<uint64_t>(bytes);
    if (dst == MemSpace::hbm && m_hbm_write) *m_hbm_write += static_cast<uint64_t>(bytes);
  }
  if (src == MemSpace::host || dst == MemSpace::host) {
    resources.push_back(m_link);
    latency_ns += m_link_timing.latency_ns;
    if (m_link_bytes) *m_link_bytes += static_cast<uint64_t>(bytes);
  }
  transfer(static_cast<double>(bytes), resources);
  return ns(latency_ns);
}

void DmaSystem::fetch_from_hbm(int64_t bytes) {
  if (m_hbm_read) *m_hbm_read += static_cast<uint64_t>(bytes);
  transfer(static_cast<double>(bytes), {m_hbm});
  sc_core::wait(ns(m_hbm_timing.latency_ns));
}

void DmaSystem::transfer(double bytes, const std::vector<int>& resources) {
  const FluidShare::Ps now = now_ps();
  account(now);
  sc_core::sc_event done;
  const uint64_t id = m_share.start(now, bytes, resources);
  for (int r : resources) m_bytes[r] += static_cast<int64_t>(bytes);
  m_waiting.emplace(id, &done);
  bool finished_now = false;
  for (uint64_t f : m_share.advance(now)) {
    if (f == id) {
      finished_now = true;
      m_waiting.erase(id);
    } else {
      complete({f});
    }
  }
  reschedule(now);
  trace_bandwidth(now);
  if (!finished_now) sc_core::wait(done);
}

void DmaSystem::wake() {
  const FluidShare::Ps now = now_ps();
  account(now);
  complete(m_share.advance(now));
  reschedule(now);
  trace_bandwidth(now);
}

void DmaSystem::complete(const std::vector<uint64_t>& done) {
  for (uint64_t id : done) {
    auto it = m_waiting.find(id);
    if (it == m_waiting.end()) continue;
    it->second->notify();
    m_waiting.erase(it);
  }
}

void DmaSystem::reschedule(FluidShare::Ps now) {
  const FluidShare::Ps next = m_share.next_finish();
  if (next != INT64_MAX) m_wake.notify(sc_time::from_value(static_cast<sc_dt::uint64>(next - now)));
}

void DmaSystem::account(FluidShare::Ps now) {
  const FluidShare::Ps dt = now - m_last_account;
  if (dt > 0) {
    for (size_t r = 0; r < m_busy_ps.size(); ++r) {
      if (m_share.resource_rate(static_cast<int>(r)) > 0) m_busy_ps[r] += dt;
    }
  }
  m_last_account = now;
}

void DmaSystem::trace_bandwidth(FluidShare::Ps now) {
  if (!m_trace || !m_trace->enabled()) return;
  const double rate = m_share.resource_rate(m_hbm) / 1e9;
  if (rate == m_last_hbm_rate) return;
  m_last_hbm_rate = rate;
  m_trace->counter(m_trace_pid, "HBM bandwidth (GB/s)", now, "hbm", rate);
}

std::vector<std::pair<std::string, sc_time>> DmaSystem::transfer_floors() const {
  std::vector<std::pair<std::string, sc_time>> out;
  for (size_t r = 0; r < m_share.resources(); ++r) {
    const int ri = static_cast<int>(r);
    if (m_bytes[r] == 0) continue;
    out.emplace_back(m_share.resource_name(ri),
                     sc_time(double(m_bytes[r]) / m_share.resource_capacity(ri), sc_core::SC_SEC));
  }
  return out;
}

void DmaSystem::finalize(sc_time elapsed) {
  account(now_ps());
  if (!m_stats) return;
  traces::StatsScope d(*m_stats, "device");
  const double seconds = elapsed.to_seconds();
  const double hbm_bytes =
      double(m_hbm_read ? m_hbm_read->value() : 0) + double(m_hbm_write ? m_hbm_write->value() : 0);
  d.add_value("hbm.busy_ns", "ns", "time with at least one HBM transfer in flight")
      .set(double(m_busy_ps[m_hbm]) / 1e3);
  d.add_value("hbm.achieved_gb_per_s", "GB/s", "HBM bytes read and written / device time")
      .set(seconds > 0 ? hbm_bytes / seconds / 1e9 : 0.0);
  d.add_value("host_link.busy_ns", "ns", "time with at least one host-link transfer in flight")
      .set(double(m_busy_ps[m_link]) / 1e3);
  for (size_t e = 0; e < m_engines.size(); ++e) {
    const int r = m_engines[e];
    if (m_bytes[r] == 0) continue;  // idle engines stay out of the report
    traces::StatsScope s = d.scope("dma.engines.e" + std::to_string(e));
    s.add_value("bytes", "bytes", "bytes moved by this DMA engine").set(m_bytes[r]);
    s.add_value("busy_ns", "ns", "time with at least one transfer in flight")
        .set(double(m_busy_ps[r]) / 1e3);
  }
}

}  // namespace wallsim::dma
