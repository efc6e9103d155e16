// Workloads: model builders on the runtime's Tensor API. A workload is named on the command
// line as NAME or NAME:key=value,... with every parameter defaulted; an unknown or impossible
// parameter is an base::InputError naming it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "wallsim/runtime/session.h"

namespace wallsim::workloads {

struct WorkloadSpec {
  std::string name;
  std::map<std::string, std::string> params;
  std::string text;  // as given
};

// Parses "NAME" or "NAME:key=value,key=value". Throws base::InputError("--workload", ...).
WorkloadSpec parse_spec(const std::string& text);

class Workload {
 public:
  virtual ~Workload() = default;
  // The resolved parameters (defaults filled in), for the report.
  virtual std::map<std::string, std::string> params() const = 0;
  // Uploads the weights (once, before any step).
  virtual void setup(runtime::Session& s) = 0;
  // Shape buckets an AOT runtime traces before the first step (the dynamic extent's values).
  virtual std::vector<int64_t> buckets(const runtime::Session& s) const = 0;
  // Records one step at dynamic extent `extent` (a bucket when tracing). Its output is read
  // back at the end of the step (a sync), as a training loop's loss or a sampled token is.
  virtual runtime::Tensor step(runtime::Session& s, int64_t index) = 0;
  // What step `index` (after the run) did, for per-kind figures: "prefill", "token" or "step".
  virtual std::string step_kind(int64_t index) const {
    (void)index;
    return "step";
  }
  // Steps a run takes when the user does not say (`decode` fixes its own).
  virtual int64_t default_steps() const { return 3; }
  // Whether `--steps` applies.
  virtual bool fixed_steps() const { return false; }
  // The MACs its plans do beyond the real shapes are masked (bounded dims), not padding.
  virtual bool masks_instead_of_padding() const { return false; }
  // AOT start-up: records one step at bucket `bucket` (no device work happens).
  virtual void trace(runtime::Session& s, int64_t bucket) = 0;
  // Everything after setup and start-up. The default runs `steps` steps, reading each one's
  // output back (a sync). A serving workload schedules its own iterations (each one a step).
  virtual void run(runtime::Session& s, int64_t steps);
  // How many ways it is split (tp=, pp=, dp=): a distributed run's ranks, one core each.
  virtual runtime::ParallelSizes parallel() const { return {}; }
  // Why its ranks do not all run the same program at the same sizes, if they do not, beyond
  // pipeline stages (which differ by construction): what keeps a run from folding (SPMD
  // folding, runtime/spmd_fold.h). Ranks that differ only in their values are alike.
  virtual std::optional<std::string> rank_asymmetry() const { return std::nullopt; }
  // A distributed run's workloads, one a rank (in rank order, this one among them), before
  // any rank's setup: a workload whose ranks share host-side state links them here (serve's
  // pipeline stages follow stage 0's scheduler). The pointers stay valid for the run.
  virtual void join(const std::vector<Workload*>& ranks) { (void)ranks; }
  // Its parameters as they are after the steps (a training step's updated weights): what the
  // tests compare between a sharded and an unsharded run. Empty for most.
  virtual std::vector<runtime::Tensor> state() const { return {}; }
  // The workload's own section of the report (name, value), if it has one: serve's request
  // latencies and scheduler figures.
  virtual std::optional<std::pair<std::string, nlohmann::ordered_json>> report() const {
    return std::nullopt;
  }
  // A data-parallel or pipelined run's own section for the whole run, from every replica's last
  // pipeline stage's workload (one a dp rank, in order), if it has one: serve's requests of all
  // replicas, as their last stages saw them.
  virtual std::optional<std::pair<std::string, nlohmann::ordered_json>> replicas_report(
      const std::vector<const Workload*>& replicas) const {
    (void)replicas;
    return std::nullopt;
  }
};

// Builds the named workload. Throws base::InputError for an unknown name or parameter, or
// impossible values.
std::unique_ptr<Workload> make_workload(const WorkloadSpec& spec);

// Names and one-line descriptions of the workloads, for --help.
std::vector<std::pair<std::string, std::string>> workload_list();

}  // namespace wallsim::workloads
