// StreamProcessor: runs instruction streams in program order — wait on semaphores, issue to an
// ExecutionUnit, record stats/trace/provenance, and have the semaphores fire when the result
// is ready. One per compute engine and one per DMA queue; a DMA queue's SystemC thread starts
// when its first stream is queued, so a core holds threads only for the queues its plans use.
#pragma once

#include <systemc>

#include <array>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "wallsim/engines/execution_unit.h"
#include "wallsim/engines/signal_scheduler.h"
#include "wallsim/traces/csv_log.h"
#include "wallsim/traces/stats.h"
#include "wallsim/traces/trace_sink.h"

namespace wallsim::engines {

enum class TraceLevel { none, plans, instructions };

// Where a processor reports: its stats scope (e.g. "device.engines.tensor"), the trace and the
// optional instruction log. Pointers may be null; all are owned elsewhere.
struct ProcessorOutputs {
  traces::StatsRegistry* stats = nullptr;
  std::string stats_prefix;
  traces::TraceSink* trace = nullptr;
  TraceLevel trace_level = TraceLevel::none;
  int trace_pid = 1;
  int trace_tid = 0;
  std::string trace_process;
  std::string trace_thread;
  traces::CsvLog* instruction_log = nullptr;
};

class StreamProcessor : public sc_core::sc_module {
 public:
  StreamProcessor(sc_core::sc_module_name name, isa::Engine engine, ExecutionUnit& unit,
                  SignalScheduler& signals, ProcessorOutputs outputs);

  // Queues `stream` of `launch`; streams run one after another in the order queued.
  void enqueue(Launch* launch, const isa::Stream* stream);

  // For the deadlock report: is a stream unfinished, and what does it wait for?
  bool busy() const { return m_current != nullptr || !m_work.empty(); }
  std::string blocked_description() const;
  // A run-time invariant violation stopped this processor (the simulation was stopped).
  const std::optional<std::string>& error() const { return m_error; }

  // Writes derived stats (utilisation over `elapsed`). Registers them on first use.
  void finalize(sc_core::sc_time elapsed);
  sc_core::sc_time busy_time() const { return m_busy; }
  int64_t instructions() const { return m_instructions; }
  isa::Engine engine() const { return m_engine; }

 private:
  struct Work {
    Launch* launch;
    const isa::Stream* stream;
  };
  void thread();
  // Spawns the DMA queue's thread on its first stream; false (and the simulation stopped, with
  // error() set) when the memory-map budget has no thread left (base::take_thread).
  bool start_thread();
  void run_stream(const Work& w);
  void ensure_outputs();
  void record(const Work& w, size_t index, const isa::Instruction& in, sc_core::sc_time start,
              sc_core::sc_time end, sc_core::sc_time ready);

  isa::Engine m_engine;
  ExecutionUnit& m_unit;
  SignalScheduler& m_signals;
  ProcessorOutputs m_out;
  std::deque<Work> m_work;
  sc_core::sc_event m_work_added;

  // Progress, for reports.
  const Work* m_current = nullptr;
  size_t m_index = 0;
  const isa::SemWait* m_waiting = nullptr;
  std::optional<std::string> m_error;

  // Stats, registered on first use so idle DMA queues stay out of the output.
  bool m_registered = false;
  bool m_started = false;
  traces::Counter* m_instr_stat = nullptr;
  traces::Counter* m_macs_stat = nullptr;
  std::array<traces::Counter*, isa::kNumDTypes> m_macs_by_dtype{};  // registered on first use
  traces::Counter* m_bytes_stat = nullptr;
  traces::Value* m_busy_cycles_stat = nullptr;
  traces::Value* m_busy_ns_stat = nullptr;
  traces::Value* m_util_stat = nullptr;
  sc_core::sc_time m_busy;
  int64_t m_busy_cycles = 0;  // exact: the sum of each instruction's cycles
  int64_t m_instructions = 0;
  std::optional<traces::Track> m_track;
};

}  // namespace wallsim::engines
