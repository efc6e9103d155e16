// CompileService: everything a host runtime knows about compiling — the plan cache, the
// on-disk cache, remembered failures, the cache entries and recompile log it reports, and the
// background compiler's queue (one job at a time).
//
// Who changes what: the Session asks it for a group's plan; it charges the modelled host time
// to the host timeline and counts into the step log's current record.
#pragma once

#include <systemc>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "wallsim/compiler_stub/compile.h"
#include "wallsim/compiler_stub/graph.h"
#include "wallsim/runtime/compile_cache.h"
#include "wallsim/runtime/config.h"
#include "wallsim/runtime/execution_mode.h"
#include "wallsim/runtime/host_timeline.h"
#include "wallsim/runtime/schedule_tuner.h"
#include "wallsim/runtime/step_log.h"

namespace wallsim::runtime {

// One compiled cache entry, as a lazy runtime's cache reports it (TorchTPU: num_cache_reqs,
// num_cache_hits, compilation_duration): requests and hits count lookups of its signature after
// the compile that made it.
struct CacheEntryRecord {
  std::string signature;  // the group signature, hex
  std::string plan;       // the plan's name
  int64_t step = -1;      // the step that compiled it; -1: start-up
  compiler_stub::CompileWork work;
  int64_t compile_ns = 0;  // modelled compile latency
  int64_t requests = 0;
  int64_t hits = 0;
  std::vector<compiler_stub::TensorType> types;  // of the group's nodes: for the recompile log
};

// Why a group was compiled again at other shapes (TORCH_LOGS=recompiles): the entry it
// replaces and the first dimension that differs.
struct RecompileRecord {
  int64_t step = -1;
  std::string plan;
  std::string signature;
  std::string previous;  // the signature compiled before for the same shape-free group
  std::string reason;    // e.g. "node 3 (batch_matmul) dim 2: 128 -> 129"
};

// A group that failed to compile and fell back under runtime.lazy.fallback: what failed and why.
struct FallbackRecord {
  int64_t step = -1;   // -1: start-up
  int64_t ops = 0;     // the group's op count
  std::string policy;  // split, eager
  std::string reason;  // the compiler's error
};

class CompileService;

// The ranks' shared compile cache (runtime.shared_compile_cache): each plan compiled by the
// first rank that needed it, and when that compile is done. A rank that finds a plan here
// waits (in compile) until then and counts a cache hit; it pays no compile of its own.
// Ranks requesting a signature at the same picosecond: the lowest of them is charged the
// compile, whatever order SystemC runs them in (a lower rank takes the attribution over from
// the rank that compiled it, which still waits in that compile: its counts, cache entry and
// recompile record move). Foreground compiles only: a background compile stays the first's.
struct SharedPlans {
  struct Entry {
    std::shared_ptr<CompiledPlan> plan;
    int64_t ready_ps = 0;
    int64_t requested_ps = 0;
    int64_t compile_ns = 0;
    int64_t compiler_rank = 0;
    bool foreground = false;                  // charged to the compiler's host, which still waits
    CompileService* compiler = nullptr;       // the rank charged the compile
    traces::TraceArgs* trace_args = nullptr;  // its compile slice's, if traced
  };
  std::unordered_map<uint64_t, Entry> plans;  // by signature hash
};

class CompileService {
 public:
  // `config` outlives the service. `plan_memory_bytes` and `memory_check`: SessionOptions.
  CompileService(const Config& config, const ExecutionMode& mode, int64_t plan_memory_bytes,
                 bool memory_check, HostTimeline& host, StepLog& log,
                 std::shared_ptr<SharedPlans> shared = nullptr, int64_t rank = 0);

  struct Outcome {
    std::shared_ptr<CompiledPlan> plan;  // null when the compile failed
    std::string error;
    int32_t node = -1;  // the group-local node the compiler named, or -1 for the group
    // compile_in_background: the compile's latency, not charged to the host; the caller
    // holds the launch behind the background compiler (background_done).
    int64_t background_ns = 0;
  };
  // A compiled plan for the group `sub`, from the cache or compiled. `tracing`: an AOT
  // start-up trace (no lookup cost, compiles charged to the host).
  Outcome compile(const compiler_stub::Graph& sub, bool tracing);
  // When a compile of `ns` queued now on the background compiler is done.
  sc_core::sc_time background_done(int64_t ns);

  // Every plan compiled, in compile order, with its lookups; every recompile with its reason.
  const std::vector<CacheEntryRecord>& entries() const { return m_entries; }
  const std::vector<RecompileRecord>& recompile_log() const { return m_recompiles; }
  // Real seconds compiler_stub spent (measured); plan bodies rebuilt after being dropped.
  double compiler_seconds() const { return m_compiler_seconds; }
  int64_t bodies_rebuilt() const { return m_bodies_rebuilt; }
  // What the tuning cache (compiler.tune.cache) answered this rank's compiles; null when the
  // run names none.
  const TuningStats* tuning_stats() const { return m_tuning ? &m_tuning->tuner->stats() : nullptr; }

 private:
  // Throws base::InputError when the host cannot hold the plan for `ids` of `sub`.
  void check_plan_memory(const compiler_stub::Graph& sub, const std::vector<int32_t>& ids) const;
  // A failure `runtime.inject` asks for, if any.
  std::optional<compiler_stub::CompileError> injected_failure(
      const compiler_stub::Graph& sub, const std::vector<int32_t>& ids) const;
  // A compile charged to this rank: counts, the entry (and its recompile record), undo data.
  void count_compile(StepRecord& record, const compiler_stub::Graph& sub, uint64_t hash,
                     uint64_t shape_free, const std::string& hex, const CompiledPlan& c,
                     int64_t ns);
  // A lower rank took over the shared compile of `hash`, the last this rank counted: undone.
  void yield_compile(uint64_t hash);
  // Charges a foreground compile of `ns` to the host (traced: into `args`, filled here).
  void charge_compile(const compiler_stub::Graph& sub, const std::vector<int32_t>& ids,
                      const std::string& hex, const CompiledPlan& c, int64_t ns,
                      traces::TraceArgs& args, std::string& ops);
  // Records the compile of a new cache entry (and, for a recompile, why).
  void note_entry(const compiler_stub::Graph& sub, uint64_t hash, uint64_t shape_free,
                  const std::string& hex, const CompiledPlan& c, int64_t compile_ns,
                  bool recompile);

  const Config& m_config;
  const ExecutionMode& m_mode;
  bool m_memory_check;
  HostTimeline& m_host;
  StepLog& m_log;
  uint64_t m_arch_fp = 0;
  CompileCache m_cache;
  std::shared_ptr<SharedPlans> m_shared;
  int64_t m_rank = 0;
  // What count_compile changed, to undo it (yield_compile).
  struct Counted {
    uint64_t hash = 0, shape_free = 0;
    StepRecord* record = nullptr;
    bool recompile = false, recompile_logged = false, shape_free_fresh = false;
    std::optional<size_t> entry_before, latest_before;
  };
  Counted m_counted;
  DiskPlanCache m_disk;
  // The compiler's options, with a tuner reading compiler.tune.cache where one is named (a run
  // compiles inside the simulation: it reuses the cache and measures nothing).
  compiler_stub::LoweringOptions m_options;
  std::unique_ptr<TuningSetup> m_tuning;
  std::vector<CacheEntryRecord> m_entries;
  std::unordered_map<uint64_t, size_t> m_entry_of;              // signature hash -> entry
  std::unordered_map<uint64_t, size_t> m_latest_of_shape_free;  // shape-free hash -> entry
  std::vector<RecompileRecord> m_recompiles;
  sc_core::sc_time m_compiler_free;  // the background compiler is busy until then
  double m_compiler_seconds = 0;
  int64_t m_bodies_rebuilt = 0;
};

}  // namespace wallsim::runtime
