// Sweeps: a JSON spec expands to points (config overrides x workload x mode); each point is one
// `wallsim run` process writing DIR/points/<id>/, and one line of DIR/results.jsonl.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wallsim/base/params.h"
#include "wallsim/driver/run_report.h"

namespace wallsim::cli {

struct SweepPoint {
  int64_t index = 0;  // position in the spec's enumeration
  std::string id;     // stable: a hash of the resolved config, workload, mode, steps, functional
  std::vector<std::pair<std::string, base::Json>> axes;  // config path -> value
  std::string workload, mode;
  std::vector<std::string> overrides;  // --set arguments
  std::vector<std::string> run_args;   // the `wallsim run` arguments, without --out
};

// More points than this are refused when the spec is read (each point's config is loaded then).
inline constexpr uint64_t kMaxSweepPoints = 100000;

struct SweepSpec {
  std::string file;
  std::string base_config;
  std::vector<SweepPoint> points;
  double timeout_s = 3600;
};

// Reads and expands a spec. Every point's config is loaded and every workload parsed before any
// point runs: a bad spec is an base::InputError naming the problem.
SweepSpec read_sweep(const std::string& file);

// Every name key_figures() can produce (some only for some workloads or configs).
std::vector<std::string> figure_names();

// The key figures of a run: its report and config.resolved.json, parsed or in `run_dir`.
base::Json key_figures(const driver::RunReport& report, const base::Json& resolved_config);
base::Json key_figures(const std::string& run_dir);

// The latest result line per point id: results.jsonl, then points/*/result.json (single-point
// runs from --index). Lines that are not results as the sweep writes them (a torn last line, a
// forged line: an id that is not 16 hex digits, an index that is not an integer in [0, 2^40])
// are skipped.
std::vector<base::Json> read_results(const std::string& dir);

}  // namespace wallsim::cli
