// In-order issue of one instruction stream at a time, with semaphores, stats and tracing.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include "wallsim/engines/stream_processor.h"

#include "wallsim/base/host_memory.h"
#include "wallsim/engines/timing_model.h"
#include "wallsim/memory/tile_io.h"

namespace wallsim::engines {

using sc_core::sc_time;

StreamProcessor::StreamProcessor(sc_core::sc_module_name name, isa::Engine engine,
                                 ExecutionUnit& unit, SignalScheduler& signals,
                                 ProcessorOutputs outputs)
    : sc_module(name),
      m_engine(engine),
      m_unit(unit),
      m_signals(signals),
      m_out(std::move(outputs)) {
  if (engine != isa::Engine::dma) {
    SC_HAS_PROCESS(StreamProcessor);
    SC_THREAD(thread);
    m_started = true;
    ensure_outputs();  // compute engines always report
  }
}

void StreamProcessor::enqueue(Launch* launch, const isa::Stream* stream) {
  if (!m_started && !start_thread()) return;
  m_work.push_back({launch, stream});
  m_work_added.notify();
}

bool StreamProcessor::start_thread() {
  m_started = true;
  if (!base::take_thread()) {
    m_error = std::string(name()) + ": " + base::thread_budget_text();
    sc_core::sc_stop();
    return false;
  }
  sc_core::sc_spawn_options opts;
  sc_core::sc_spawn([this] { thread(); }, (std::string(basename()) + "_thread").c_str(), &opts);
  return true;
}

void StreamProcessor::ensure_outputs() {
  if (m_registered) return;
  m_registered = true;
  if (m_out.stats) {
    traces::StatsScope s(*m_out.stats, m_out.stats_prefix);
    m_instr_stat = &s.add_counter("instructions", "", "instructions issued");
    if (m_engine == isa::Engine::tensor) {
      m_macs_stat = &s.add_counter("macs", "", "multiply-accumulates done by matmuls");
    }
    if (m_unit.clock_period_fs() > 0) {
      s.add_value("clock_mhz", "MHz", "the clock this engine's cycles count")
          .set(1e9 / double(m_unit.clock_period_fs()));
      m_busy_cycles_stat =
          &s.add_value("busy_cycles", "cycles", "cycles the engine was occupied, in its own clock");
    }
    m_busy_ns_stat = &s.add_value("busy_ns", "ns", "time the engine was occupied");
    m_util_stat = &s.add_value("utilization", "fraction", "busy time / device time");
    if (m_engine == isa::Engine::dma) {
      m_bytes_stat = &s.add_counter("bytes", "bytes", "bytes moved by this queue's descriptors");
    }
  }
  if (m_out.trace && m_out.trace->enabled() && m_out.trace_level == TraceLevel::instructions) {
    m_track = m_out.trace->declare_track(m_out.trace_pid, m_out.trace_process, m_out.trace_tid,
                                         m_out.trace_thread);
  }
}

void StreamProcessor::thread() {
  for (;;) {
    while (m_work.empty()) sc_core::wait(m_work_added);
    Work w = m_work.front();
    m_work.pop_front();
    m_current = &w;
    run_stream(w);
    m_current = nullptr;
    if (m_error) return;  // the simulation is stopping
  }
}

void StreamProcessor::run_stream(const Work& w) {
  ensure_outputs();
  m_unit.begin_stream(*w.stream);
  Launch& launch = *w.launch;
  const auto& instrs = w.stream->instructions;
  InstructionTimes* times =
      launch.times.data() + launch.stream_offset[size_t(w.stream - launch.plan->streams.data())];
  sc_time last_end;
  bool have_prev = false;
  sc_time last_ready = sc_core::sc_time_stamp();
  for (size_t i = 0; i < instrs.size(); ++i) {
    const isa::Instruction& in = instrs[i];
    m_index = i;
    for (const isa::SemWait& wait : in.waits) {
      m_waiting = &wait;
      launch.semaphores.wait_at_least(wait.sem, wait.value);
    }
    m_waiting = nullptr;
    const sc_time start = sc_core::sc_time_stamp();
    sc_time tail;
    try {
      tail = m_unit.run(in, launch, have_prev && start == last_end);
    } catch (const std::exception& e) {
      const sc_time now = sc_core::sc_time_stamp();
      const int64_t period = m_unit.clock_period_fs();
      std::string when = "at " + std::to_string(now.to_seconds() * 1e9) + " ns";
      if (period > 0) {
        when += " (cycle " + std::to_string(time_to_cycles(now, period)) + " of its clock)";
      }
      m_error = when + ", " + std::string(name()) + " plan '" + launch.plan->name + "' " +
                w.stream->name + "[" + std::to_string(i) + "] (" +
                std::string(isa::info(in.op).name) + "): " + e.what();
      sc_core::sc_stop();
      return;
    }
    const sc_time end = sc_core::sc_time_stamp();
    // Results retire in order: a stream's semaphore counts then name its instructions in order.
    times[i] = {start, end, end + tail};
    const sc_time ready = std::max(end + tail, last_ready);
    for (const isa::SemSignal& s : in.signals) m_signals.signal(ready, &launch, s.sem, s.add);
    record(w, i, in, start, end, ready);
    if (ready > last_ready) last_ready = ready;
    last_end = end;
    have_prev = true;
  }
  m_signals.stream_done(last_ready, &launch);
}

void StreamProcessor::record(const Work& w, size_t index, const isa::Instruction& in, sc_time start,
                             sc_time end, sc_time ready) {
  const sc_time busy = end - start;
  m_busy += busy;
  ++m_instructions;
  if (m_instr_stat) ++*m_instr_stat;
  const int64_t macs = isa::macs(in);
  if (m_macs_stat) *m_macs_stat += static_cast<uint64_t>(macs);
  if (m_macs_stat && macs > 0) {
    const isa::DType dtype = tensor_dtype(in);
    traces::Counter*& c = m_macs_by_dtype[static_cast<int>(dtype)];
    if (!c) {
      c = &traces::StatsScope(*m_out.stats, m_out.stats_prefix)
               .add_counter(std::string(isa::name_of(dtype)) + ".macs", "",
                            "multiply-accumulates done by matmuls at this dtype");
    }
    *c += static_cast<uint64_t>(macs);
  }
  const int64_t bytes = m_engine == isa::Engine::dma ? m_unit.bytes_moved(in) : 0;
  if (m_bytes_stat) *m_bytes_stat += static_cast<uint64_t>(bytes);
  if (in.node >= 0) {
    if (NodeTotals* n = w.launch->node_totals(in.node)) {
      n->busy[static_cast<int>(m_engine)] += busy;
      ++n->instructions;
      if (bytes > 0 && w.stream->dma_engine >= 0) {
        const auto e = static_cast<size_t>(w.stream->dma_engine);
        if (n->dma_engine_bytes.size() <= e) n->dma_engine_bytes.resize(e + 1);
        n->dma_engine_bytes[e] += bytes;
      }
      n->dma_bytes += bytes;
      n->macs += double(macs);
    }
  }
  const int64_t period = m_unit.clock_period_fs();
  const int64_t cycles = time_to_cycles(busy, period);
  m_busy_cycles += cycles;
  if (m_track) {
    traces::TraceArgs args;
    args.add("plan", std::string_view(w.launch->plan->name));
    args.add("index", static_cast<int64_t>(index));
    if (in.node >= 0) args.add("node", static_cast<int64_t>(in.node));
    if (period > 0) args.add("cycles", cycles);
    if (bytes > 0) args.add("bytes", bytes);
    args.add("latency_ps", static_cast<int64_t>((ready - start).value()));
    m_out.trace->slice(*m_track, static_cast<traces::TimePs>(start.value()),
                       static_cast<traces::TimePs>((end - start).value()), isa::info(in.op).name,
                       isa::name_of(m_engine), args);
  }
  if (m_out.instruction_log) {
    m_out.instruction_log->row({w.launch->plan->name, w.stream->name, std::to_string(index),
                                std::string(isa::info(in.op).name), std::to_string(in.node),
                                std::to_string(start.value()), std::to_string(end.value()),
                                std::to_string(ready.value()), std::to_string(cycles),
                                std::to_string(bytes)});
  }
}

std::string StreamProcessor::blocked_description() const {
  if (!m_current) return std::string(name()) + ": queued streams never started";
  std::string where = std::string(name()) + " plan '" + m_current->launch->plan->name + "' " +
                      m_current->stream->name + "[" + std::to_string(m_index) + "]";
  if (!m_waiting) return where + " stopped";
  const auto& plan = *m_current->launch->plan;
  return where + " waits for " + plan.semaphores[m_waiting->sem] +
         " >= " + std::to_string(m_waiting->value) + ", which reached " +
         std::to_string(m_current->launch->semaphores.value(m_waiting->sem));
}

void StreamProcessor::finalize(sc_time elapsed) {
  if (!m_registered) return;
  const int64_t period = m_unit.clock_period_fs();
  if (m_busy_cycles_stat && period > 0) {
    m_busy_cycles_stat->set(m_busy_cycles);
  }
  if (m_busy_ns_stat) m_busy_ns_stat->set(m_busy.to_seconds() * 1e9);
  if (m_util_stat) {
    m_util_stat->set(elapsed.value() > 0 ? double(m_busy.value()) / double(elapsed.value()) : 0.0);
  }
}

}  // namespace wallsim::engines
