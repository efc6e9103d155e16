// `wallsim study NAME [--config C] [--spec FILE] [--out DIR] [--jobs N]` for the studies that
// are a list of labelled runs (decode, serving, mask, granularity, fallback): each run is its own
// `wallsim run` process; the study gathers their key figures into NAME.md and NAME.csv, keeps
// their run directories (traces included) under runs/, and draws its plots with
// tools/plot_study.py. The spec, configs/studies/NAME.json, holds the sizes and distributions.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli_util.h"
#include "commands.h"
#include "subprocess.h"
#include "sweep.h"
#include "wallsim/base/json_object.h"
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

struct StudyRun {
  std::string label, workload, mode;
  std::vector<std::string> overrides;
  int64_t steps = 0;  // 0: the workload's own
  bool may_fail = false;
};

struct StudySpec {
  std::string title, question;
  std::vector<StudyRun> runs;
  std::vector<std::string> columns;
  std::string trace_level = "plans";
};

// What a study's columns may name: the key figures and the step figures below.
std::vector<std::string> study_figure_names() {
  std::vector<std::string> n = figure_names();
  for (const char* k : {"p50_step_ns", "p99_step_ns", "hbm_bytes_per_step", "host_link_busy_ns",
                        "wasted_flop_fraction"}) {
    n.push_back(k);
  }
  return n;
}
bool is_figure(const std::string& k) {
  static const std::vector<std::string> names = study_figure_names();
  return std::find(names.begin(), names.end(), k) != names.end();
}

StudySpec read_study(const std::string& file, const std::string& config) {
  const Json j = base::read_json_file(file);
  base::JsonObject o(j, file);
  StudySpec s;
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
    if (const Json* set = r.opt("set")) {
      base::JsonObject so(*set, r.at("set"));
      for (const auto& [k, v] : set->items()) run.overrides.push_back(k + "=" + v.dump());
    }
    r.finish();
    // Checked before anything runs: the workload and the config this run would use.
    try {
      auto w = workloads::make_workload(workloads::parse_spec(run.workload));
      if (w->fixed_steps()) run.steps = 0;
    } catch (const InputError& e) {
      throw InputError(r.at("workload"), e.what());
    }
    try {
      runtime::load_config(config, run.overrides);
    } catch (const InputError& e) {
      throw InputError(r.at("set"), e.what());
    }
    s.runs.push_back(run);
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

// Figures a study adds to a run's key figures: step-time percentiles over the warm steps.
void add_step_figures(const driver::RunReport& r, Json& f) {
  f["p50_step_ns"] = r.warm_percentile_ns(50);
  f["p99_step_ns"] = r.warm_percentile_ns(99);
  const double hbm = f.value("hbm_read_bytes", 0.0) + f.value("hbm_write_bytes", 0.0);
  f["hbm_bytes_per_step"] = r.steps.empty() ? 0.0 : hbm / double(r.steps.size());
  const Json& dev = r.device;
  if (dev.contains("host_link")) f["host_link_busy_ns"] = dev["host_link"].at("busy_ns");
  f["wasted_flop_fraction"] =
      f.value("padding_flop_fraction", 0.0) + f.value("masked_flop_fraction", 0.0);
}

void run_study(const std::string& name, const std::string& config, const std::string& spec_file,
               const std::string& out, const std::vector<std::string>& extra_overrides, int jobs) {
  const StudySpec spec = read_study(spec_file, config);
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
                {"run", "runs/" + std::to_string(i)}};
    if (codes[i] != 0) {
      const std::string last = last_line(logs[i]);
      if (!r.may_fail) {
        throw InputError("study " + name, "the run '" + r.label + "' failed (exit code " +
                                              std::to_string(codes[i]) + "): " + last);
      }
      row["status"] = "stopped";
      row["error"] = last;
      row["figures"] = Json::object();
    } else {
      const driver::RunReport report = driver::RunReport::read(run_dirs[i]);
      Json f = key_figures(report, base::read_json_file(run_dirs[i] + "/config.resolved.json"));
      add_step_figures(report, f);
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
  {
    std::ofstream f(dir->file(name + ".md"));
    f << md.str();
  }
  {
    std::ofstream f(dir->file(name + ".csv"));
    f << csv.str();
  }
  {
    std::ofstream f(dir->file("study.json"));
    f << Json{{"study", name}, {"title", spec.title}, {"runs", rows}}.dump(1) << "\n";
  }
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
  static const std::pair<const char*, const char*> kStudies[] = {
      {"decode", "a prompt, then new tokens: exact shapes, bounded shapes, AOT buckets, native"},
      {"serving", "a request stream: static batching on AOT; continuous under native and fused"},
      {"mask", "a block-diagonal mask: sent dense every forward, or rebuilt on the chip"},
      {"granularity", "fused eager at growing group sizes against AOT"},
      {"fallback", "injected compile failures under each fallback policy"}};
  for (const auto& [name, what] : kStudies) {
    struct Args {
      std::string config = "configs/trn2.json", spec, out;
      std::vector<std::string> overrides;
      int jobs = 2;
    };
    auto a = std::make_shared<Args>();
    a->spec = std::string("configs/studies/") + name + ".json";
    a->out = std::string("out/") + name;
    CLI::App* cmd = study.add_subcommand(name, what);
    cmd->add_option("--config,-c", a->config, "chip and runtime config (JSON)");
    cmd->add_option("--spec", a->spec, "study spec: the runs, their sizes, the table's columns");
    cmd->add_option("--set", a->overrides, "override a config value in every run");
    cmd->add_option("--out,-o", a->out, "output directory (replaced if it holds an earlier run)");
    cmd->add_option("--jobs,-j", a->jobs, "runs at once")->check(CLI::Range(1, 64));
    const std::string n = name;
    cmd->callback([a, n, cmd] {
      find_default_file(cmd, "--config", &a->config);
      find_default_file(cmd, "--spec", &a->spec);
      run_study(n, a->config, a->spec, a->out, a->overrides, a->jobs);
    });
  }
}

}  // namespace wallsim::cli
