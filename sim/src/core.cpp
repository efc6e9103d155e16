// Elaboration of a core from its config and its wiring, and plan launch.
#include "wallsim/sim/core.h"

#include <algorithm>
#include <cmath>

#include "wallsim/dma/dma_system.h"
#include "wallsim/dma/network.h"
#include "wallsim/engines/timing_model.h"
#include "wallsim/memory/memory_error.h"
#include "wallsim/sim/collective_engine.h"
#include "wallsim/sim/comm_overlap.h"
#include "wallsim/sim/critical_path.h"

namespace wallsim::sim {

using engines::Launch;
using engines::StreamProcessor;
using sc_core::sc_time;

namespace {

sc_time ns(int64_t v) { return sc_time::from_value(static_cast<sc_dt::uint64>(v) * 1000u); }

int64_t now_ps() { return static_cast<int64_t>(sc_core::sc_time_stamp().value()); }

// A compute engine's unit, its occupancy of each instruction told to the core's CommOverlap.
class MeteredComputeUnit final : public engines::ExecutionUnit {
 public:
  MeteredComputeUnit(std::unique_ptr<engines::ExecutionUnit> unit, CommOverlap& meter)
      : m_unit(std::move(unit)), m_meter(meter) {}
  sc_time run(const isa::Instruction& in, Launch& launch, bool back_to_back) override {
    m_meter.begin(CommOverlap::Activity::compute, now_ps());
    const sc_time tail = m_unit->run(in, launch, back_to_back);
    m_meter.end(CommOverlap::Activity::compute, now_ps());
    return tail;
  }
  void begin_stream(const isa::Stream& s) override { m_unit->begin_stream(s); }
  int64_t clock_period_fs() const override { return m_unit->clock_period_fs(); }
  int64_t bytes_moved(const isa::Instruction& in) const override { return m_unit->bytes_moved(in); }

 private:
  std::unique_ptr<engines::ExecutionUnit> m_unit;
  CommOverlap& m_meter;
};

// A DMA queue's execution unit: descriptors go to the DMA engine serving the queue, collectives
// to the system's collective engine (the queue waits for the collective to complete, told to
// the core's CommOverlap).
class DmaQueueUnit final : public engines::ExecutionUnit {
 public:
  DmaQueueUnit(dma::DmaSystem& dma, int queue, CollectiveEngine* collectives, int chip, int core,
               CommOverlap& meter)
      : m_dma(dma),
        m_queue(queue),
        m_collectives(collectives),
        m_chip(chip),
        m_core(core),
        m_meter(meter) {}
  void begin_stream(const isa::Stream& s) override {
    m_engine = s.dma_engine;
    m_issue = {};
  }
  sc_time run(const isa::Instruction& in, Launch& launch, bool back_to_back) override {
    if (isa::is_collective(in.op)) {
      if (!m_collectives)
        throw memory::MemoryError("collectives run on a system: place the plans on cores");
      m_meter.begin(CommOverlap::Activity::collective, now_ps());
      m_collectives->run(in, launch, m_chip, m_core, m_queue);
      m_meter.end(CommOverlap::Activity::collective, now_ps());
      return sc_time();
    }
    return m_dma.execute(in, m_engine, launch.functional ? &launch.memory : nullptr, m_issue,
                         back_to_back, m_queue, launch.plan);
  }
  int64_t clock_period_fs() const override { return 0; }
  int64_t bytes_moved(const isa::Instruction& in) const override {
    if (isa::is_collective(in.op)) return in.uses(isa::F_Src0) ? in.src[0].bytes() : in.dst.bytes();
    return dma::DmaSystem::bytes_moved(in);
  }

 private:
  dma::DmaSystem& m_dma;
  int m_queue;
  CollectiveEngine* m_collectives;
  int m_chip, m_core;
  CommOverlap& m_meter;
  int m_engine = 0;
  dma::DmaSystem::QueueIssue m_issue;
};

}  // namespace

Core::Core(sc_core::sc_module_name name, const ChipConfig& chip, CoreOptions options,
           CoreWiring wiring)
    : sc_module(name),
      m_chip(chip),
      m_options(options),
      m_wiring(std::move(wiring)),
      m_tensors(m_wiring.tensors) {
  SC_HAS_PROCESS(Core);
  SC_THREAD(launcher);

  const isa::ArchSpec& arch = m_chip.arch;
  const TimingConfig& timing = m_chip.timing;
  traces::StatsRegistry* stats = m_options.stats;
  if (stats) {
    traces::StatsScope d(*stats, m_wiring.stats_scope);
    m_plans_stat = &d.add_counter("plans_launched", "", "plans launched");
    m_launch_ns_stat = &d.add_value("launch_overhead_ns", "ns",
                                    "time spent starting plans (switch, semaphore reset, fetch)");
  }
  if (m_options.functional) {
    m_sbuf =
        std::make_unique<memory::OnChipStore>(arch.sbuf.partitions, arch.sbuf.bytes_per_partition);
    m_psum =
        std::make_unique<memory::OnChipStore>(arch.psum.partitions, arch.psum.bytes_per_partition);
  }
  m_signals = std::make_unique<engines::SignalScheduler>("signals");
  m_comm = std::make_unique<CommOverlap>();
  if (m_options.trace && m_options.trace->enabled() &&
      m_options.trace_level != engines::TraceLevel::none) {
    // Each exposed interval a slice on a track of the core's own, declared at the first (a core
    // without collectives keeps its trace as it was). Above the plan spans' track id.
    m_comm->on_exposed([this](int64_t lo, int64_t hi) {
      if (!m_exposed_track) {
        const int tid = std::max(1000, 100 + m_chip.arch.dma.queues_max()) + 1;
        m_exposed_track = m_options.trace->declare_track(m_wiring.trace_pid, m_wiring.trace_process,
                                                         tid, "exposed communication");
      }
      m_options.trace->slice(*m_exposed_track, static_cast<traces::TimePs>(lo),
                             static_cast<traces::TimePs>(hi - lo), "exposed", "comm", {});
    });
  }
  dma::DmaWiring dw;
  dw.network = m_wiring.network;
  dw.chip = m_wiring.chip;
  dw.core = m_wiring.core;
  dw.hbm = m_wiring.hbm;
  dw.host_link = m_wiring.host_link;
  dw.engines = m_wiring.dma_engines;
  dw.remote = m_wiring.remote_hbm;
  m_dma = std::make_unique<dma::DmaSystem>("dma", timing.dma, timing.hbm, timing.host_link,
                                           std::move(dw), stats, m_wiring.stats_scope);
  const int pid = m_wiring.trace_pid;
  const std::string& process = m_wiring.trace_process;
  const std::string& scope = m_wiring.stats_scope;

  auto outputs = [&](const std::string& prefix, int tid, const std::string& thread) {
    engines::ProcessorOutputs o;
    o.stats = stats;
    o.stats_prefix = prefix;
    o.trace = m_options.trace;
    o.trace_level = m_options.trace_level;
    o.trace_pid = pid;
    o.trace_tid = tid;
    o.trace_process = process;
    o.trace_thread = thread;
    o.instruction_log = m_options.instruction_log;
    return o;
  };
  struct ComputeEngine {
    isa::Engine engine;
    std::unique_ptr<engines::TimingModel> model;
  };
  ComputeEngine compute[] = {
      {isa::Engine::tensor, engines::make_tensor_timing(timing.tensor)},
      {isa::Engine::vector, engines::make_lane_timing(timing.vector)},
      {isa::Engine::scalar, engines::make_lane_timing(timing.scalar)},
  };
  int tid = 1;
  for (auto& c : compute) {
    const std::string engine(isa::name_of(c.engine));
    const auto& shared = timing.shared_sbuf_port;
    const bool shares = std::find(shared.begin(), shared.end(), c.engine) != shared.end();
    // Metered only where collectives can run: without a collective engine none overlaps.
    std::unique_ptr<engines::ExecutionUnit> unit =
        std::make_unique<engines::ComputeUnit>(std::move(c.model), shares ? &m_sbuf_port : nullptr);
    if (m_wiring.collectives) unit = std::make_unique<MeteredComputeUnit>(std::move(unit), *m_comm);
    m_units.push_back(std::move(unit));
    m_compute.push_back(std::make_unique<StreamProcessor>(
        engine.c_str(), c.engine, *m_units.back(), *m_signals,
        outputs(scope + ".engines." + engine, tid++, engine + " engine")));
  }
  for (int q = 0; q < arch.dma.queues_max(); ++q) {
    const std::string queue = "q" + std::to_string(q);
    m_units.push_back(std::make_unique<DmaQueueUnit>(*m_dma, q, m_wiring.collectives, m_wiring.chip,
                                                     m_wiring.core, *m_comm));
    m_queues.push_back(std::make_unique<StreamProcessor>(
        ("dma_" + queue).c_str(), isa::Engine::dma, *m_units.back(), *m_signals,
        outputs(scope + ".dma.queues." + queue, 100 + q, "dma queue " + std::to_string(q))));
  }
  if (m_options.trace && m_options.trace->enabled() &&
      m_options.trace_level != engines::TraceLevel::none) {
    m_launch_track = m_options.trace->declare_track(pid, process, 0, "plans");
  }
}

Core::~Core() = default;

Launch& Core::launch(const isa::Plan& plan, std::vector<int64_t> scalars,
                     std::vector<std::string> tensor_names, std::shared_ptr<const void> keep) {
  if (!tensor_names.empty() && tensor_names.size() != plan.tensors.size()) {
    throw base::InputError("plan '" + plan.name + "'",
                           "binds " + std::to_string(tensor_names.size()) + " tensor names to " +
                               std::to_string(plan.tensors.size()) + " tensors");
  }
  int dma_streams = 0;
  for (const isa::Stream& s : plan.streams) dma_streams += s.engine == isa::Engine::dma;
  if (dma_streams > static_cast<int>(m_queues.size())) {
    throw base::InputError("plan '" + plan.name + "'",
                           "uses " + std::to_string(dma_streams) +
                               " DMA queues; arch.dma.engines x queues_per_engine is " +
                               std::to_string(m_queues.size()));
  }
  Launch& l = m_launches.emplace_back(plan, static_cast<int>(launch_count()), std::move(scalars));
  l.functional = m_options.functional;
  l.tensor_names = std::move(tensor_names);
  l.keep = std::move(keep);
  if (l.functional) {
    l.memory = {m_sbuf.get(), m_psum.get(), m_tensors,
                l.plan,       &l.scalars,   l.tensor_names.empty() ? nullptr : &l.tensor_names};
  }
  // Before the simulation starts the launcher finds the queue by itself; later (from a process,
  // or between two sc_start calls) it is woken a delta cycle later.
  const auto status = sc_core::sc_get_status();
  if (status != sc_core::SC_ELABORATION && status != sc_core::SC_BEFORE_END_OF_ELABORATION &&
      status != sc_core::SC_END_OF_ELABORATION) {
    m_launch_added.notify(sc_core::SC_ZERO_TIME);
  }
  return l;
}

StreamProcessor& Core::processor_for(const isa::Stream& stream, int dma_ordinal) {
  switch (stream.engine) {
    case isa::Engine::tensor:
      return *m_compute[0];
    case isa::Engine::vector:
      return *m_compute[1];
    case isa::Engine::scalar:
      return *m_compute[2];
    case isa::Engine::dma:
      break;
  }
  return *m_queues[dma_ordinal];  // launch() checked the count
}

void Core::launcher() {
  const LaunchTiming& t = m_chip.timing.launch;
  for (;;) {
    while (m_next_launch == launch_count()) sc_core::wait(m_launch_added);
    Launch& l = m_launches[m_next_launch - m_first_live];
    // Looked up after every wait: a host may retire (free) it as soon as it drains.
    const auto wait_drained = [this](size_t index) {
      const Launch* prev;
      while ((prev = live_launch(index)) && !prev->drained) sc_core::wait(prev->drained_event);
    };
    // The launch before it that is not asynchronous (every launch before it, when none is).
    if (t.wait_for_previous && m_ordered_launches > 0) wait_drained(m_last_ordered);
    for (size_t index : l.after) wait_drained(index);
    if (!l.async) {
      m_last_ordered = m_next_launch;
      ++m_ordered_launches;
    }
    ++m_next_launch;
    const sc_time begin = sc_core::sc_time_stamp();
    l.launch_begin = begin;
    sc_core::wait(ns(t.switch_ns + t.semaphore_reset_ns));
    m_dma->fetch_from_hbm(l.plan->instruction_count() * t.bytes_per_instruction);
    const sc_time started = sc_core::sc_time_stamp();
    m_launch_overhead += started - begin;
    if (m_plans_stat) ++*m_plans_stat;
    if (m_launch_track) {
      traces::TraceArgs args;
      args.add("instructions", l.plan->instruction_count());
      m_options.trace->slice(*m_launch_track, static_cast<traces::TimePs>(begin.value()),
                             static_cast<traces::TimePs>((started - begin).value()),
                             "launch " + l.plan->name, "launch", args);
    }
    const int64_t sbuf = l.plan->on_chip_bytes(isa::MemSpace::sbuf);
    const int64_t psum = l.plan->on_chip_bytes(isa::MemSpace::psum);
    m_sbuf_peak = std::max(m_sbuf_peak, sbuf);
    m_psum_peak = std::max(m_psum_peak, psum);
    if (m_options.trace && m_options.trace->enabled() && !l.async) {  // beside another plan
      m_options.trace->counter(m_wiring.trace_pid, "SBUF allocated (bytes)",
                               static_cast<traces::TimePs>(started.value()), "sbuf",
                               static_cast<double>(sbuf));
    }

    l.started = true;
    l.start_time = started;
    l.streams_pending = static_cast<int>(l.plan->streams.size());
    // An asynchronous launch's empty streams are not queued: they would wait behind the other
    // launches' streams on those queues, and its drain with them.
    if (l.async) {
      l.streams_pending = 0;
      for (const isa::Stream& s : l.plan->streams) l.streams_pending += !s.instructions.empty();
    }
    if (l.streams_pending == 0) {
      l.drained = true;
      l.end_time = started;
      l.drained_event.notify();
      continue;
    }
    int dma_ordinal = 0;
    for (const isa::Stream& s : l.plan->streams) {
      StreamProcessor& p = processor_for(s, s.engine == isa::Engine::dma ? dma_ordinal++ : 0);
      if (!l.async || !s.instructions.empty()) p.enqueue(&l, &s);
    }
  }
}

std::optional<std::string> Core::error() const {
  for (const auto* group : {&m_compute, &m_queues}) {
    for (const auto& p : *group) {
      if (p->error()) return p->error();
    }
  }
  return std::nullopt;
}

bool Core::all_drained() const {
  for (const Launch& l : m_launches) {
    if (!l.drained) return false;
  }
  return true;
}

std::vector<std::string> Core::deadlock_report() const {
  std::vector<std::string> out;
  for (const auto* group : {&m_compute, &m_queues}) {
    for (const auto& p : *group) {
      if (p->busy()) out.push_back(p->blocked_description());
    }
  }
  if (m_next_launch < launch_count()) {
    out.push_back(std::to_string(launch_count() - m_next_launch) +
                  " plan(s) never launched: the plan before them did not drain");
  }
  return out;
}

sc_time Core::end_time() const {
  sc_time end = m_retired_end;
  for (const Launch& l : m_launches) {
    if (l.drained && l.end_time > end) end = l.end_time;
  }
  return end;
}

Core::LaunchTimes Core::launch_times(size_t index) const {
  if (const Launch* l = live_launch(index)) return {l->launch_begin, l->start_time, l->end_time};
  return index < m_retired.size() ? m_retired[index].times : LaunchTimes{};
}

namespace {

// Sums the totals both kinds have (a node's and an op's).
template <class T>
void add_common(Core::OpTotals& o, const T& t) {
  o.instructions += t.instructions;
  o.dma_bytes += t.dma_bytes;
  o.macs += t.macs;
  for (int e = 0; e < isa::kNumEngines; ++e) o.busy[e] += t.busy[e];
  if (o.dma_engine_bytes.size() < t.dma_engine_bytes.size())
    o.dma_engine_bytes.resize(t.dma_engine_bytes.size());
  for (size_t e = 0; e < t.dma_engine_bytes.size(); ++e)
    o.dma_engine_bytes[e] += t.dma_engine_bytes[e];
}

}  // namespace

void Core::OpTotals::add(const engines::NodeTotals& t, sc_time exposed) {
  ++nodes;
  add_common(*this, t);
  exposed_ns += exposed.to_seconds() * 1e9;
}

Core::OpTotals& Core::OpTotals::operator+=(const OpTotals& o) {
  nodes += o.nodes;
  add_common(*this, o);
  exposed_ns += o.exposed_ns;
  dma_active_ns += o.dma_active_ns;
  return *this;
}

void Core::retire_drained() {
  for (; !m_launches.empty() && m_launches.front().drained;
       m_launches.pop_front(), ++m_first_live) {
    Launch& l = m_launches.front();
    const CriticalPath path = critical_path(l);
    m_outside_ops += path.no_node;
    // The launch's ops, in order of first node, to group their DMA time.
    std::vector<OpTotals*> ops;
    std::vector<int32_t> op_of(l.plan->nodes.size(), -1);
    for (size_t i = 0; i < l.plan->nodes.size(); ++i) {
      const isa::NodeInfo& n = l.plan->nodes[i];
      if (n.op == "input") {
        m_outside_ops += path.by_node[i];
        continue;
      }
      OpTotals& op = m_op_totals[n.op];
      op.add(l.nodes[i], path.by_node[i]);
      const auto at = std::find(ops.begin(), ops.end(), &op);
      op_of[i] = static_cast<int32_t>(at - ops.begin());
      if (at == ops.end()) ops.push_back(&op);
      if (i < l.origins.size() && l.origins[i] >= 0)
        m_origin_totals[l.origins[i]].add(l.nodes[i], path.by_node[i]);
    }
    const std::vector<sc_time> dma_active = dma_active_by_group(l, op_of, ops.size());
    for (size_t k = 0; k < ops.size(); ++k)
      ops[k]->dma_active_ns += dma_active[k].to_seconds() * 1e9;
    // Launches start in launch order, so the union grows at its end.
    if (l.end_time > l.start_time && l.end_time > m_busy_end) {
      m_busy += l.end_time - std::max(l.start_time, m_busy_end);
      m_busy_end = l.end_time;
    }
    m_retired_end = std::max(m_retired_end, l.end_time);
    if (m_launch_track)
      m_retired.push_back({l.name, {l.launch_begin, l.start_time, l.end_time}, l.async});
    if (m_on_retire) m_on_retire(l);
  }
}

void Core::finalize() {
  const sc_time elapsed = end_time();
  m_comm->finish();
  for (auto& p : m_compute) p->finalize(elapsed);
  for (auto& p : m_queues) p->finalize(elapsed);
  m_wiring.network->finalize();
  m_dma->finalize(elapsed);
  if (m_launch_ns_stat) m_launch_ns_stat->set(m_launch_overhead.to_seconds() * 1e9);
  if (m_options.stats) {
    traces::StatsScope d(*m_options.stats, m_wiring.stats_scope);
    d.add_value("sbuf.peak_bytes", "bytes", "largest SBUF allocation of a launched plan")
        .set(m_sbuf_peak);
    d.add_value("psum.peak_bytes", "bytes", "largest PSUM allocation of a launched plan")
        .set(m_psum_peak);
    if (m_comm->collective_ps() > 0) {
      d.add_value("comm.collective_ns", "ns",
                  "time a collective, send or recv of this core was in progress (the union, "
                  "from the core's arrival to the end)")
          .set(double(m_comm->collective_ps()) / 1e3);
      d.add_value("comm.exposed_ns", "ns",
                  "of comm.collective_ns, the time no compute engine of the core was busy")
          .set(double(m_comm->exposed_ps()) / 1e3);
      d.add_value("comm.overlapped_ns", "ns",
                  "of comm.collective_ns, the time a compute engine of the core was busy")
          .set(double(m_comm->overlapped_ps()) / 1e3);
    }
    // The busiest resource's own time: an engine's occupancy, or the bytes a DMA engine, HBM or
    // the host link carried at full bandwidth. No schedule of the same plans can be shorter.
    std::string bound_by = "none";
    sc_time bound;
    for (const auto& p : m_compute) {
      if (p->busy_time() > bound) {
        bound = p->busy_time();
        bound_by = std::string(p->basename());
      }
    }
    for (const auto& [name, floor] : m_dma->transfer_floors()) {
      if (floor > bound) {
        bound = floor;
        bound_by = name;
      }
    }
    d.add_value("bound.ns", "ns", "the busiest resource's time: a lower bound on device time")
        .set(bound.to_seconds() * 1e9);
    d.add_text("bound.resource", "", "the resource that sets bound.ns").set(bound_by);
    d.add_value("bound.fraction", "fraction", "bound.ns / device time (1 = perfectly pipelined)")
        .set(elapsed.value() > 0 ? bound.to_seconds() / elapsed.to_seconds() : 0.0);
    // MACs done / what the array could do in the run's time: rows x cols MACs per cycle at
    // bf16, fewer at a dtype that takes several passes (fp32). The overall fraction weighs each
    // dtype's MACs by its passes, so a run that keeps the array busy at any mix reaches 1.
    if (m_options.stats->find_as<traces::Counter>(m_wiring.stats_scope + ".engines.tensor.macs")) {
      const auto& tt = m_chip.timing.tensor;
      const double cycles = elapsed.to_seconds() * tt.freq_mhz * 1e6;
      const double per_cycle = double(m_chip.arch.tensor.rows) * m_chip.arch.tensor.cols;
      double used = 0.0;
      for (int i = 0; i < isa::kNumDTypes; ++i) {
        const auto dtype = static_cast<isa::DType>(i);
        const std::string name(isa::name_of(dtype));
        const auto* c = m_options.stats->find_as<traces::Counter>(
            m_wiring.stats_scope + ".engines.tensor." + name + ".macs");
        if (!c) continue;
        const double passes = double(engines::tensor_passes(dtype, tt));
        used += double(c->value()) * passes;
        const double peak = per_cycle * cycles / passes;
        traces::StatsScope t = d.scope("engines.tensor." + name);
        t.add_value("peak_tflops", "TFLOP/s",
                    "the array's peak at this dtype: 2 x rows x cols x clock / passes")
            .set(peak_tensor_flops(m_chip) / passes / 1e12);
        t.add_value("peak_fraction", "fraction",
                    "MACs at this dtype / what the array could do at this dtype in the run's time")
            .set(peak > 0 ? double(c->value()) / peak : 0.0);
      }
      d.add_value("engines.tensor.peak_fraction", "fraction",
                  "array time used by matmuls (MACs x passes of their dtype) / (rows x cols x "
                  "the run's cycles in the tensor clock)")
          .set(cycles > 0 ? used / (per_cycle * cycles) : 0.0);
    }
  }
  if (m_launch_track && m_chip.timing.launch.wait_for_previous) {
    // Plans that are not asynchronous run one after another, so their spans never overlap on
    // one track. Its track id lies above every DMA queue's (100 + queue). Asynchronous launches
    // (collectives beside the compute) go on a track of their own, declared at the first; they
    // run in order on one queue, so each span starts no earlier than the one before ends.
    const int tid = std::max(1000, 100 + m_chip.arch.dma.queues_max());
    traces::Track plans = m_options.trace->declare_track(m_wiring.trace_pid, m_wiring.trace_process,
                                                         tid, "plan spans");
    std::optional<traces::Track> async_plans;
    sc_time async_end;
    const auto span = [&](size_t index, const std::string& name, sc_time start, sc_time end,
                          bool async) {
      if (async) {
        if (!async_plans) {
          async_plans = m_options.trace->declare_track(m_wiring.trace_pid, m_wiring.trace_process,
                                                       tid + 2, "asynchronous plan spans");
        }
        start = std::min(end, std::max(start, async_end));
        async_end = end;
      }
      traces::TraceArgs args;
      args.add("index", static_cast<int64_t>(index));
      m_options.trace->slice(
          async ? *async_plans : plans, static_cast<traces::TimePs>(start.value()),
          static_cast<traces::TimePs>((end - start).value()), name, "plan", args);
    };
    for (size_t i = 0; i < m_retired.size(); ++i) {
      const Retired& r = m_retired[i];
      span(i, r.name, r.times.start, r.times.end, r.async);
    }
    for (const Launch& l : m_launches) {
      if (l.drained) span(static_cast<size_t>(l.index), l.name, l.start_time, l.end_time, l.async);
    }
  }
}

}  // namespace wallsim::sim
