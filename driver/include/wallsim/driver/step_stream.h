// A run's steps, streamed: each step's record goes to a spool file as it finishes, and only
// bounded sums plus one wall time per step (for the exact p50/p99 of the "warm" section) stay
// in memory. At the end the spool becomes the "steps" array of stats.json and the steps table
// of stats.txt, byte for byte what the records held in memory gave.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "wallsim/base/params.h"
#include "wallsim/runtime/session.h"

namespace wallsim::driver {

// What the report's "warm" section needs of the steps: each step's wall time by kind, in step
// order, and where the warm steps (after the last step that compiled) begin.
class StepWallTimes {
 public:
  void add(const std::string& kind, int64_t wall_ns, bool compiled);
  // The "warm" section (RunReport::warm_json).
  base::Json warm_json() const;

 private:
  std::vector<std::string> m_kinds;           // in order of first appearance
  std::vector<std::vector<int64_t>> m_walls;  // by kind, in step order
  std::vector<size_t> m_warm_from;            // by kind: its first warm entry in m_walls
  size_t m_steps = 0;
  size_t m_first_warm = 0;  // step index
};

class StepStream {
 public:
  // `spool`: a file the stream writes (one JSON line per step) and finish() removes.
  explicit StepStream(std::string spool);
  void add(const runtime::StepRecord& r, const std::string& kind);

  int64_t steps() const { return m_steps; }
  const StepWallTimes& wall_times() const { return m_walls; }
  // Sums over the steps.
  int64_t wall_ns = 0;
  runtime::HostTimes host_ns{};
  int64_t device_busy_ns = 0;
  runtime::Counts counts;
  double padded_macs = 0, real_macs = 0;

  // Puts the spooled steps into `stats_json` (written with "steps": []) and writes the
  // report's sections of stats.txt with the steps table among them; removes the spool.
  void finish(const std::string& stats_json, const std::string& stats_txt,
              const base::Json& sections);

 private:
  template <class F>
  void for_each_spooled(F&& f);

  std::string m_spool_path;
  std::ofstream m_spool;
  int64_t m_steps = 0;
  StepWallTimes m_walls;
  std::vector<std::string> m_columns;  // the steps table's columns and their widths
  std::vector<size_t> m_widths;
};

// A step's JSON record, as stats.json holds it (`kind` when not empty).
base::Json step_json(const runtime::StepRecord& r, const std::string& kind);

}  // namespace wallsim::driver
