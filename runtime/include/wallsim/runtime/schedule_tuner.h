// Measured schedule tuning (issue 35), the runtime's side: the tuning cache file and the
// ScheduleTuner (compiler_stub/tuning.h) that answers from it and, where allowed, measures the
// model's candidates as one-op plans on a simulated core of the run's own chip. Like TVM's
// measured autotuning, with the simulator as the device. docs/COMPILER.md, "Measured tuning".
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "wallsim/compiler_stub/tuning.h"
#include "wallsim/runtime/config.h"

namespace wallsim::sim {
class Core;
class System;
}  // namespace wallsim::sim

namespace wallsim::runtime {

// One tuned op: its key's parts, the measured pick and the model's (so the cache is also a
// record of the model's error), and every candidate measured.
struct TuningEntry {
  std::string family;     // "matmul"
  std::string signature;  // the op alone's group signature: shapes, dtypes, layouts, arch
  std::string arch;       // compiler_stub::arch_fingerprint, 16 hex digits
  std::string timing;     // the chip's timing section (what the simulated times depend on)
  // compiler_stub::build_id() "/" sim::build_id(): the compiler that made the candidates and
  // the simulator that timed them (a change to either's code is a miss).
  std::string build;
  int64_t candidates = 0;  // compiler.tune.candidates
  struct Point {
    std::string point;
    double predicted_ns = 0, simulated_ns = 0;  // simulated 0: the point did not compile or run
  };
  std::vector<Point> measured;  // the model's pick first, then by predicted time
  std::string chosen;           // the fastest measured point
  std::string key() const;
};

// The cache file: {"format": "wallsim-tuning-cache", "version": 1, "entries": [...]}, entries
// sorted by key, so the same tuning writes the same bytes.
class TuningCache {
 public:
  // An absent file is an empty cache; anything else unreadable throws base::InputError naming
  // the file and what is wrong.
  static TuningCache load(const std::string& path);
  const TuningEntry* find(const std::string& key) const;
  void put(TuningEntry e);
  void save(const std::string& path) const;  // atomically
  size_t size() const { return m_entries.size(); }

 private:
  std::map<std::string, TuningEntry> m_entries;
};

struct TuningStats {
  int64_t queries = 0;      // ops the compiler asked about
  int64_t hits = 0;         // answered from the cache
  int64_t misses = 0;       // no entry, not measured: the model's pick
  int64_t tuned = 0;        // measured now
  int64_t changed = 0;      // of those measured or hit, the pick differs from the model's
  int64_t simulations = 0;  // candidates compiled and simulated
  double device_ns = 0;     // the simulated time of every candidate run (the device's busy time)
  double wall_seconds = 0;  // real time spent compiling and simulating candidates
};

// Answers from `cache`; with `measure`, measures what the cache lacks on a core of `chip` (the
// given one, else its own one-core System, built at the first measurement: the process must not
// be inside a simulation then, nor have elaborated another System it will run after).
class SimulatedTuner : public compiler_stub::ScheduleTuner {
 public:
  SimulatedTuner(const Config& config, TuningCache& cache, bool measure, sim::Core* core = nullptr);
  ~SimulatedTuner() override;
  std::string choose(const compiler_stub::TuningQuery& q) override;
  const TuningStats& stats() const { return m_stats; }

 private:
  double simulate(const compiler_stub::TuningQuery& q, const std::string& point);
  const Config& m_config;
  TuningCache& m_cache;
  bool m_measure;
  sim::Core* m_core;
  std::unique_ptr<sim::System> m_system;
  std::string m_arch, m_timing;
  TuningStats m_stats;
};

// The config's compiler.tune as used by `compile`, `validate shapes` and the runtime: the cache
// (loaded from compiler.tune.cache, empty without one) and a tuner over it, installed in
// `options`; none when tuning is off and no cache is named.
struct TuningSetup {
  TuningCache cache;
  std::unique_ptr<SimulatedTuner> tuner;
  std::string path;
  // Writes the cache back (when a file is named and something was measured).
  void save() const;
  std::string summary() const;  // one line of TuningStats
};
std::unique_ptr<TuningSetup> setup_tuning(const Config& config,
                                          compiler_stub::LoweringOptions& options, bool measure,
                                          sim::Core* core = nullptr);

}  // namespace wallsim::runtime
