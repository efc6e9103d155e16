// `wallsim study NAME [--config C] [--spec FILE] [--out DIR] [--jobs N]` for the studies that
// are a list of labelled runs (decode, serving, mask, granularity, fallback, scaleout,
// tensor-parallel): each run is its own `wallsim run` process; the study gathers their key
// figures into NAME.md and NAME.csv,
// keeps their run directories (traces included) under runs/, and draws its plots with
// tools/plot_study.py. The spec, configs/studies/NAME.json, holds the sizes and distributions,
// and may name the study's default config (`"config"`, used when --config is not given).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "cli_util.h"
#include "commands.h"
#include "findings/findings.h"
#include "subprocess.h"
#include "sweep.h"
#include "wallsim/base/file_write.h"
#include "wallsim/base/json_object.h"
#include "wallsim/compiler_stub/cost_model.h"
#include "wallsim/runtime/config.h"
#include "wallsim/runtime/session.h"
#include "wallsim/sim/exec.h"
#include "wallsim/traces/run_directory.h"
#include "wallsim/traces/stats.h"
#include "wallsim/workloads/workload.h"

namespace wallsim::cli {
namespace {

namespace fs = std::filesystem;
using base::InputError;
using base::Json;

// The studies of studies.def.
struct StudyKind {
  const char* name;
  const char* what;
  std::vector<std::string> (*findings)(const Json& rows);
};

constexpr StudyKind kStudies[] = {
#define STUDY(name, what, fn) {#name, what, &findings::fn},
#include "studies.def"
#undef STUDY
};

const StudyKind& study_kind(const std::string& name) {
  for (const StudyKind& k : kStudies) {
    if (name == k.name) return k;
  }
  throw std::logic_error("study '" + name + "' is not in studies.def");
}

struct StudyRun {
  std::string label, workload, mode;
  std::vector<std::string> overrides;
  int64_t steps = 0;  // 0: the workload's own
  bool may_fail = false;
  // The comparisons a finding makes along one axis (spec order): a run may be in several.
  std::vector<std::string> series;
  std::string model;  // the model a "{model}" run was expanded for, or ""
};

// A model a spec's "{model}" runs are repeated for: its label and workload.
struct StudyModel {
  std::string label, workload;
};

struct StudySpec {
  std::string title, question;
  std::vector<StudyModel> models;
  std::vector<StudyRun> runs;
  std::vector<std::string> columns;
  std::string trace_level = "plans";
};

// The figures of add_prefill_token_figures, below.
const std::vector<std::string> kPrefillTokenFigures = {
    "prefill_ns", "prefill_comm_fraction", "prefill_tokens_per_s",
    "token_ns",   "token_comm_fraction",   "tokens_per_s"};

// What a study's columns may name: the key figures and the step figures below.
std::vector<std::string> study_figure_names() {
  std::vector<std::string> n = figure_names();
  for (const char* k :
       {"p50_step_ns", "p99_step_ns", "token_p50_ns", "token_p99_ns", "hbm_bytes_per_step",
        "host_link_busy_ns", "wasted_flop_fraction", "plans_per_step", "transfer_per_step_ns",
        "device_per_step_ns", "world", "instances", "step_wall_ns", "step_comm_exposed_ns",
        "step_compute_ns", "efa_bytes_per_step"}) {
    n.push_back(k);
  }
  n.insert(n.end(), kPrefillTokenFigures.begin(), kPrefillTokenFigures.end());
  return n;
}
bool is_figure(const std::string& k) {
  static const std::vector<std::string> names = study_figure_names();
  return std::find(names.begin(), names.end(), k) != names.end();
}

// `extra_models`: LABEL=WORKLOAD from the command line, after the spec's own.
StudySpec read_study(const std::string& file, const std::string& config,
                     const std::vector<std::string>& extra_models) {
  const Json j = base::read_json_file(file);
  base::JsonObject o(j, file);
  StudySpec s;
  if (const Json* models = o.opt("models")) {
    if (!models->is_array()) throw InputError(o.at("models"), "expected a list of models");
    for (size_t i = 0; i < models->size(); ++i) {
      base::JsonObject m((*models)[i], o.at("models") + "[" + std::to_string(i) + "]");
      s.models.push_back({m.str("label"), m.str("workload")});
      m.finish();
    }
  }
  for (const std::string& m : extra_models) {
    const size_t eq = m.find('=');
    if (eq == 0 || eq == std::string::npos || eq + 1 == m.size())
      throw InputError("--model " + m, "expected LABEL=WORKLOAD");
    s.models.push_back({m.substr(0, eq), m.substr(eq + 1)});
  }
  if (o.opt("config")) o.str("config");  // the study's default config: read by the command
  s.title = o.str("title");
  s.question = o.opt("question") ? o.str("question") : "";
  if (o.opt("trace_level")) s.trace_level = o.str("trace_level");
  if (s.trace_level != "none" && s.trace_level != "plans" && s.trace_level != "instructions")
    throw InputError(o.at("trace_level"), "expected none, plans or instructions");
  const Json& cols = o.array("columns");
  for (size_t i = 0; i < cols.size(); ++i) {
    if (!cols[i].is_string())
      throw InputError(o.at("columns") + "[" + std::to_string(i) + "]", "expected a figure name");
    s.columns.push_back(cols[i].get<std::string>());
    if (!is_figure(s.columns.back())) {
      throw InputError(o.at("columns") + "[" + std::to_string(i) + "]",
                       "unknown figure \"" + s.columns.back() + "\"" +
                           base::did_you_mean(s.columns.back(), study_figure_names()));
    }
  }
  const Json& runs = o.array("runs");
  if (runs.empty()) throw InputError(o.at("runs"), "expected at least one run");
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string where = o.at("runs") + "[" + std::to_string(i) + "]";
    base::JsonObject r(runs[i], where);
    StudyRun run;
    run.label = r.str("label");
    run.workload = r.str("workload");
    run.mode = r.str("mode");
    runtime::mode_named(run.mode, r.at("mode"));
    run.steps = r.integer_or("steps", 1, 1000000, 0);
    run.may_fail = r.boolean_or("may_fail", false);
    if (const Json* sr = r.opt("series")) {
      if (sr->is_string()) {
        run.series.push_back(sr->get<std::string>());
      } else {
        run.series = string_list(*sr, r.at("series"));
      }
    }
    if (const Json* set = r.opt("set")) {
      base::JsonObject so(*set, r.at("set"));
      for (const auto& [k, v] : set->items()) run.overrides.push_back(k + "=" + v.dump());
    }
    r.finish();
    try {
      runtime::load_config(config, run.overrides);
    } catch (const InputError& e) {
      throw InputError(r.at("set"), e.what());
    }
    // A "{model}" run is repeated for each model, its label prefixed with the model's.
    std::vector<StudyRun> expanded;
    const size_t at = run.workload.find("{model}");
    if (at == std::string::npos) {
      expanded.push_back(run);
    } else {
      if (s.models.empty()) throw InputError(r.at("workload"), "names {model}, but no models");
      for (const StudyModel& m : s.models) {
        StudyRun e = run;
        e.workload.replace(at, 7, m.workload);
        e.label = m.label + ": " + run.label;
        e.model = m.label;
        expanded.push_back(e);
      }
    }
    // Checked before anything runs: the workload and the config this run would use.
    for (StudyRun& e : expanded) {
      try {
        auto w = workloads::make_workload(workloads::parse_spec(e.workload));
        if (w->fixed_steps()) e.steps = 0;
      } catch (const InputError& err) {
        throw InputError(r.at("workload") + " (" + e.workload + ")", err.what());
      }
      s.runs.push_back(e);
    }
  }
  o.finish();
  return s;
}

// A figure as the table shows it: times in ms, fractions with three decimals.
std::string cell(const Json& f, const std::string& key) {
  if (!f.contains(key) || f[key].is_null()) return "-";
  const Json& v = f[key];
  if (v.is_string()) return v.get<std::string>();
  const double d = v.get<double>();
  if (key.size() > 3 && key.compare(key.size() - 3, 3, "_ns") == 0) return fmt(d / 1e6, 3);
  if (key.find("bytes") != std::string::npos) return fmt(d / double(1 << 20), 1);
  if (key.find("fraction") != std::string::npos || key.find("utilization") != std::string::npos)
    return fmt(d, 3);
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  return fmt(d, std::abs(d) >= 100 ? 1 : 3);
}

std::string heading(const std::string& key) {
  if (key.size() > 3 && key.compare(key.size() - 3, 3, "_ns") == 0)
    return key.substr(0, key.size() - 3) + " ms";
  const size_t b = key.find("bytes");
  if (b != std::string::npos) return key.substr(0, b) + "MiB" + key.substr(b + 5);
  return key;
}

// Figures a study adds to a run's key figures: step-time percentiles over the warm steps (none,
// shown "-", when the last step compiled) and over every token step (decode, serve).
void add_step_figures(const driver::RunReport& r, Json& f) {
  const bool warm = !r.warm_steps().empty();
  f["p50_step_ns"] = warm ? Json(r.warm_percentile_ns(50)) : Json(nullptr);
  f["p99_step_ns"] = warm ? Json(r.warm_percentile_ns(99)) : Json(nullptr);
  bool tokens = false;
  for (size_t i = 0; i < r.steps.size(); ++i) tokens = tokens || r.step_kind(i) == "token";
  if (tokens) {
    f["token_p50_ns"] = r.kind_percentile_ns(50, "token");
    f["token_p99_ns"] = r.kind_percentile_ns(99, "token");
  }
  const double hbm = f.value("hbm_read_bytes", 0.0) + f.value("hbm_write_bytes", 0.0);
  f["hbm_bytes_per_step"] = r.steps.empty() ? 0.0 : hbm / double(r.steps.size());
  const double steps = r.steps.empty() ? 1.0 : double(r.steps.size());
  f["transfer_per_step_ns"] = f.value("transfer_ns", 0.0) / steps;
  f["device_per_step_ns"] = f.value("device_busy_ns", 0.0) / steps;
  f["plans_per_step"] =
      r.steps.empty() ? 0.0 : f.value("plans_launched", 0.0) / double(r.steps.size());
  const Json& dev = r.device;
  if (dev.contains("host_link")) f["host_link_busy_ns"] = dev["host_link"].at("busy_ns");
  f["wasted_flop_fraction"] =
      f.value("padding_flop_fraction", 0.0) + f.value("masked_flop_fraction", 0.0);
}

// Figures of a distributed run (stats.json's "distributed" section; none for one rank): its
// world and instances (the chips elaborated over an instance's), the last step's wall time (its
// slowest rank's), rank 0's exposed communication in it (comm_exposed_ns, the device's: time in
// collectives with no compute engine busy) and the rest of its step (compute,
// launches, transfers), and the bytes sent over EFA per step.
void add_distributed_figures(const Json& stats, const Json& config, Json& f) {
  if (!stats.contains("distributed")) return;
  const Json& d = stats["distributed"];
  const Json& topo = config.at("topology");
  const int64_t per_instance =
      topo.at("torus_x").get<int64_t>() * topo.at("torus_y").get<int64_t>();
  f["world"] = d.at("world");
  f["instances"] = (d.at("chips").get<int64_t>() + per_instance - 1) / per_instance;
  const Json& walls = d.at("whole_run").at("step_wall_ns");
  const Json& steps = stats.at("steps");
  if (walls.empty() || steps.empty()) return;
  const Json& last = steps.back();
  const double comm = last.value("comm_exposed_ns", 0.0);
  f["step_wall_ns"] = walls.back();
  f["step_comm_exposed_ns"] = comm;
  f["step_compute_ns"] = last.at("wall_ns").get<double>() - comm;
  f["efa_bytes_per_step"] =
      d.at("whole_run").at("link_bytes").value("efa", 0.0) / double(steps.size());
}

// Figures of a run with a prefill step and token steps (decode), sharded or not: the prefill's
// wall time and the last token step's (a distributed step's slowest rank's), the share of each
// that is rank 0's exposed communication, and the tokens per second each makes (the prompt's
// tokens over the prefill; one token a step, batch 1). Added where a spec's columns name one
// (kPrefillTokenFigures).

void add_prefill_token_figures(const Json& stats, Json& f) {
  const Json& steps = stats.at("steps");
  const Json* walls = stats.contains("distributed")
                          ? &stats["distributed"].at("whole_run").at("step_wall_ns")
                          : nullptr;
  auto wall = [&](size_t i) {
    return walls ? (*walls)[i].get<double>() : steps[i].at("wall_ns").get<double>();
  };
  int64_t prefill = -1, token = -1;
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string kind = steps[i].value("kind", "");
    if (kind == "prefill" && prefill < 0) prefill = int64_t(i);
    if (kind == "token") token = int64_t(i);
  }
  if (prefill < 0 || token < 0) return;
  const Json& params = stats.at("workload").at("params");
  const double prompt =
      params.contains("prompt") ? std::stod(params["prompt"].get<std::string>()) : std::nan("");
  const Json& p = steps[size_t(prefill)];
  const Json& t = steps[size_t(token)];
  const double pw = wall(size_t(prefill)), tw = wall(size_t(token));
  // A prefill that compiled (fused: a new shape at step 0) shows "-": its time is the compile's.
  const bool compiled = p.value("compile_ns", 0.0) > 0;
  f["prefill_ns"] = compiled ? Json(nullptr) : Json(pw);
  f["prefill_comm_fraction"] =
      compiled ? Json(nullptr) : Json(p.value("comm_exposed_ns", 0.0) / pw);
  f["prefill_tokens_per_s"] =
      compiled || std::isnan(prompt) ? Json(nullptr) : Json(prompt / pw * 1e9);
  f["token_ns"] = tw;
  f["token_comm_fraction"] = t.value("comm_exposed_ns", 0.0) / tw;
  f["tokens_per_s"] = 1e9 / tw;
}

void run_study(const std::string& name, const std::string& config, const std::string& spec_file,
               const std::string& out, const std::vector<std::string>& extra_overrides,
               const std::vector<std::string>& extra_models, int jobs) {
  const StudySpec spec = read_study(spec_file, config, extra_models);
  const bool names_prefill_token =
      std::any_of(spec.columns.begin(), spec.columns.end(), [](const std::string& c) {
        return std::count(kPrefillTokenFigures.begin(), kPrefillTokenFigures.end(), c) > 0;
      });
  std::unique_ptr<traces::RunDirectory> dir = sim::open_run_directory(out);
  const std::string runs_dir = dir->subdir("runs");
  std::vector<std::vector<std::string>> commands;
  std::vector<std::string> logs, run_dirs;
  for (size_t i = 0; i < spec.runs.size(); ++i) {
    const StudyRun& r = spec.runs[i];
    const std::string rd = runs_dir + "/" + std::to_string(i);
    std::vector<std::string> args = {"wallsim",    "run",      "--config",      config,
                                     "--workload", r.workload, "--mode",        r.mode,
                                     "--out",      rd,         "--trace-level", spec.trace_level};
    if (r.steps > 0) {
      args.push_back("--steps");
      args.push_back(std::to_string(r.steps));
    }
    for (const auto& o : r.overrides) {
      args.push_back("--set");
      args.push_back(o);
    }
    for (const auto& o : extra_overrides) {
      args.push_back("--set");
      args.push_back(o);
    }
    commands.push_back(args);
    logs.push_back(runs_dir + "/" + std::to_string(i) + ".log");
    run_dirs.push_back(rd);
  }
  std::cout << spec.title << ": " << spec.runs.size() << " runs\n" << std::flush;
  PoolOptions pool;
  pool.jobs = jobs;
  size_t finished = 0;  // one line per finished run; the runs' own output is in their logs
  const std::vector<int> codes = run_all(commands, logs, pool, [&](size_t i, int code, double) {
    std::cout << "  (" << ++finished << "/" << spec.runs.size() << ") " << spec.runs[i].label
              << ": " << (code == 0 ? "ok" : "exit code " + std::to_string(code)) << "\n"
              << std::flush;
  });
  Json rows = Json::array();
  for (size_t i = 0; i < spec.runs.size(); ++i) {
    const StudyRun& r = spec.runs[i];
    Json row = {{"label", r.label},
                {"workload", r.workload},
                {"mode", r.mode},
                {"set", r.overrides},
                {"series", r.series},
                {"model", r.model},
                {"run", "runs/" + std::to_string(i)}};
    if (codes[i] != 0) {
      const std::string last = last_line(logs[i]);
      if (!r.may_fail) {
        throw Failed("study " + name + ": the run '" + r.label + "' failed (exit code " +
                     std::to_string(codes[i]) + "): " + last);
      }
      row["status"] = "stopped";
      row["error"] = last;
      row["figures"] = Json::object();
    } else {
      const driver::RunReport report = driver::RunReport::read(run_dirs[i]);
      const Json resolved = base::read_json_file(run_dirs[i] + "/config.resolved.json");
      Json f = key_figures(report, resolved);
      add_step_figures(report, f);
      const Json stats = base::read_json_file(run_dirs[i] + "/stats.json");
      add_distributed_figures(stats, resolved, f);
      if (names_prefill_token) add_prefill_token_figures(stats, f);
      for (const auto& [k, v] : f.items()) {
        // figure_names() lists what the spec may name; a figure missing there is a bug here.
        if (!is_figure(k)) throw std::logic_error("figure '" + k + "' missing from figure_names()");
      }
      row["status"] = "ok";
      row["figures"] = f;
    }
    rows.push_back(row);
  }
  // The table.
  std::ostringstream md, csv;
  md << "# " << spec.title << "\n\n";
  if (!spec.question.empty()) md << spec.question << "\n\n";
  md << "Config `" << config << "`, spec `" << spec_file
     << "`. Simulated times in ms; every number comes from the runs under `runs/` (one "
        "`wallsim run` each; their stats.json, and traces).\n\n| run | mode | status";
  for (const auto& c : spec.columns) md << " | " << heading(c);
  md << " |\n|---|---|---";
  for (size_t i = 0; i < spec.columns.size(); ++i) md << "|---";
  md << "|\n";
  csv << "label,workload,mode,status";
  for (const auto& c : spec.columns) csv << "," << c;
  csv << ",error\n";
  for (const Json& row : rows) {
    const Json& f = row["figures"];
    md << "| " << row["label"].get<std::string>() << " | " << row["mode"].get<std::string>()
       << " | " << row["status"].get<std::string>();
    csv << csv_cell(row["label"]) << "," << csv_cell(row["workload"]) << ","
        << csv_cell(row["mode"]) << "," << csv_cell(row["status"]);
    for (const auto& c : spec.columns) {
      md << " | " << cell(f, c);
      csv << "," << csv_cell(f.contains(c) ? f[c] : Json());
    }
    md << " |\n";
    csv << "," << csv_cell(row.value("error", Json())) << "\n";
  }
  for (const Json& row : rows) {
    if (row["status"] != "ok") {
      md << "\n`" << row["label"].get<std::string>()
         << "` stopped: " << row.value("error", std::string()) << "\n";
    }
  }
  const std::vector<std::string> found = study_kind(name).findings(rows);
  if (!found.empty()) {
    md << "\nFindings (generated from the table's runs):\n\n";
    for (const std::string& line : found) md << "- " << line << "\n";
  }
  base::write_file_atomically(dir->file(name + ".md"), md.str());
  base::write_file_atomically(dir->file(name + ".csv"), csv.str());
  base::write_file_atomically(
      dir->file("study.json"),
      Json{{"study", name}, {"title", spec.title}, {"overrides", extra_overrides}, {"runs", rows}}
              .dump(1) +
          "\n");
  // The plots, drawn by the study's script from study.json and the runs' stats.
  const std::string staging = fs::path(dir->file("study.json")).parent_path().string();
  const std::string cmd = "/usr/bin/python3 '" + project_file("tools/plot_study.py") + "' '" +
                          staging + "' > '" + dir->file("plots.log") + "' 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::cerr << "wallsim: warning: the plots were not drawn (see " << out
              << "/plots.log; python3-matplotlib from Debian is needed)\n";
  }
  dir->commit();
  std::cout << md.str() << "\n"
            << out << ": " << name << ".md, " << name << ".csv, *.png, study.json, runs/<i>/\n";
}

}  // namespace

void add_run_studies(CLI::App& study) {
  for (const StudyKind& kind : kStudies) {
    const char* name = kind.name;
    const char* what = kind.what;
    struct Args {
      std::string config = "configs/trn2.json", spec, out, profile;
      std::vector<std::string> overrides, models;
      double cost_factor = 1.0;
      int jobs = 2;
    };
    auto a = std::make_shared<Args>();
    a->spec = std::string("configs/studies/") + name + ".json";
    a->out = std::string("out/") + name;
    CLI::App* cmd = study.add_subcommand(name, what);
    cmd->add_option("--config,-c", a->config, "chip and runtime config (JSON)");
    cmd->add_option("--spec", a->spec, "study spec: the runs, their sizes, the table's columns");
    cmd->add_option("--set", a->overrides, "override a config value in every run");
    cmd->add_option(
        "--out,-o", a->out,
        "output directory (replaced only if it is an earlier wallsim output: .wallsim-output)");
    cmd->add_option("--jobs,-j", a->jobs, "runs at once")->check(CLI::Range(1, 64));
    cmd->add_option("--profile", a->profile,
                    "compile-cost profile of every run (neuron, xla; default: the config's)");
    cmd->add_option("--cost-factor", a->cost_factor,
                    "scale every compile-cost term of --profile (the sensitivity band)")
        ->check(CLI::Range(0.001, 1000.0));
    cmd->add_option("--model", a->models,
                    "LABEL=WORKLOAD: repeat the spec's {model} runs for this model too");
    const std::string n = name;
    cmd->callback([a, n, cmd] {
      find_default_file(cmd, "--spec", &a->spec);
      // Without --config, the spec's own "config" when it names one (scaleout: trn1), else trn2.
      if (cmd->get_option("--config")->count() == 0) {
        const Json spec = base::read_json_file(a->spec);
        if (spec.is_object() && spec.contains("config") && spec["config"].is_string())
          a->config = spec["config"].get<std::string>();
      }
      find_default_file(cmd, "--config", &a->config);
      std::vector<std::string> overrides;
      if (!a->profile.empty() || a->cost_factor != 1.0) {
        const runtime::Config c = runtime::load_config(a->config, a->overrides);
        const std::string profile =
            a->profile.empty() ? std::string(compiler_stub::name_of(c.runtime.compile_cost.profile))
                               : a->profile;
        overrides = compile_cost_overrides(c, profile, a->cost_factor);
      }
      overrides.insert(overrides.end(), a->overrides.begin(), a->overrides.end());
      run_study(n, a->config, a->spec, a->out, overrides, a->models, a->jobs);
    });
  }
}

}  // namespace wallsim::cli
