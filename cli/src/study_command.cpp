// `wallsim study wall [--config C] [--spec FILE] [--out DIR]`: the compilation wall. Each
// (workload, compile-cost profile, mode) point is its own `wallsim run` process (SystemC
// elaborates once per process); the study reads their stats.json and writes a table.
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli_util.h"
#include "commands.h"
#include "subprocess.h"
#include "wallsim/base/file_write.h"
#include "wallsim/base/json_object.h"
#include "wallsim/base/params.h"
#include "wallsim/driver/run_report.h"
#include "wallsim/runtime/session.h"
#include "wallsim/sim/exec.h"
#include "wallsim/traces/run_directory.h"
#include "wallsim/workloads/workload.h"

namespace wallsim::cli {
namespace {

struct StudyArgs {
  std::string config = "configs/trn2.json";
  std::string spec = "configs/studies/wall.json";
  std::string out = "out/wall";
  std::vector<std::string> overrides;
};

struct WallSpec {
  std::vector<std::string> workloads;
  std::vector<std::string> modes;
  std::vector<std::string> profiles;
  int64_t steps = 5;
  // Factors every compile-cost term of a profile is scaled by, for the sensitivity band.
  std::vector<double> sensitivity = {0.5, 2.0};
};

WallSpec read_spec(const std::string& file) {
  base::Json j = base::read_json_file(file);
  if (!j.is_object()) throw base::InputError(file, "expected an object");
  WallSpec s;
  for (const auto& [key, value] : j.items()) {
    const std::string path = file + ": " + key;
    if (!key.empty() && key[0] == '_') continue;
    if (key == "workloads") {
      s.workloads = string_list(value, path);
      for (size_t i = 0; i < s.workloads.size(); ++i) {  // checked before anything runs
        try {
          workloads::make_workload(workloads::parse_spec(s.workloads[i]));
        } catch (const base::InputError& e) {
          throw base::InputError(path + "[" + std::to_string(i) + "] (" + s.workloads[i] + ")",
                                 e.what());
        }
      }
    } else if (key == "modes") {
      s.modes = string_list(value, path);
      for (size_t i = 0; i < s.modes.size(); ++i) {
        runtime::mode_named(s.modes[i], path + "[" + std::to_string(i) + "]");
      }
    } else if (key == "profiles") {
      s.profiles = string_list(value, path);
      for (size_t i = 0; i < s.profiles.size(); ++i) {
        if (s.profiles[i] != "neuron" && s.profiles[i] != "xla")
          throw base::InputError(path + "[" + std::to_string(i) + "]",
                                 "unknown profile '" + s.profiles[i] + "' (neuron, xla)");
      }
    } else if (key == "steps") {
      if (!value.is_number_integer() || value.get<int64_t>() < 2 || value.get<int64_t>() > 100000)
        throw base::InputError(path, "expected an integer in [2, 100000]");
      s.steps = value.get<int64_t>();
    } else if (key == "sensitivity") {
      if (!value.is_array()) throw base::InputError(path, "expected a list of factors");
      s.sensitivity.clear();
      for (size_t i = 0; i < value.size(); ++i) {
        if (!value[i].is_number() || value[i].get<double>() <= 0 || value[i].get<double>() > 1000)
          throw base::InputError(path + "[" + std::to_string(i) + "]",
                                 "expected a factor in (0, 1000]");
        s.sensitivity.push_back(value[i].get<double>());
      }
    } else {
      throw base::InputError(path, "unknown key (workloads, modes, profiles, steps, sensitivity)");
    }
  }
  if (s.workloads.empty() || s.modes.empty() || s.profiles.empty())
    throw base::InputError(file, "needs workloads, modes and profiles");
  return s;
}

struct Point {
  std::string workload, profile, mode;
  double factor = 1;  // the profile's compile costs scaled by this (1: as fitted)
  driver::RunReport report;
  double ms(double ns) const { return ns / 1e6; }
  double total_ms() const { return ms(double(report.total_ns())); }
};

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

// Overtake points per workload, profile and mode: as fitted, and with every compile cost of
// the profile scaled by each sensitivity factor.
std::string sensitivity_table(const std::vector<Point>& points, const WallSpec& spec,
                              const std::vector<const runtime::ExecutionMode*>& baselines) {
  std::ostringstream md;
  md << "\n## Overtake points with a sensitivity band\n\n"
     << "Each cell: as fitted [with every compile-cost term of the profile x";
  for (size_t i = 0; i < spec.sensitivity.size(); ++i)
    md << (i ? ", x" : "") << fmt(spec.sensitivity[i], 2);
  md << "]. The fitted profiles and their sources: docs/CALIBRATION.md, *Compile cost*.\n\n"
     << "| workload | profile | mode |";
  std::string rule = "|---|---|---|";
  for (const auto* b : baselines) {
    md << " overtakes " << b->name() << " after |";
    rule += "---|";
  }
  md << "\n" << rule << "\n";
  auto find = [&](const std::string& w, const std::string& prof, const std::string& mode,
                  double f) -> const Point* {
    for (const auto& p : points) {
      if (p.workload == w && p.profile == prof && p.mode == mode && p.factor == f) return &p;
    }
    return nullptr;
  };
  for (const auto& w : spec.workloads) {
    for (const auto& prof : spec.profiles) {
      for (const auto& mode : spec.modes) {
        md << "| " << w << " | " << prof << " | " << mode << " |";
        for (const auto* b : baselines) {
          auto at = [&](double f) {
            const Point* p = find(w, prof, mode, f);
            const Point* q = find(w, prof, std::string(b->name()), f);
            return p && q && p != q ? p->report.overtakes(q->report) : std::string("-");
          };
          md << " " << at(1.0);
          if (mode != b->name()) {
            md << " [";
            for (size_t i = 0; i < spec.sensitivity.size(); ++i)
              md << (i ? ", " : "") << at(spec.sensitivity[i]);
            md << "]";
          }
          md << " |";
        }
        md << "\n";
      }
    }
  }
  return md.str();
}

}  // namespace

std::vector<std::string> compile_cost_overrides(const runtime::Config& config,
                                                const std::string& profile, double factor) {
  if (profile != "neuron" && profile != "xla")
    throw base::InputError("--profile", "unknown profile '" + profile + "' (neuron, xla)");
  std::vector<std::string> out = {"runtime.compile_cost.profile=\"" + profile + "\""};
  if (factor == 1.0) return out;
  const auto& c =
      profile == "xla" ? config.runtime.compile_cost.xla : config.runtime.compile_cost.neuron;
  const std::string key = "runtime.compile_cost." + profile + ".";
  const std::pair<const char*, double> terms[] = {{"fixed_ms", c.fixed_ms},
                                                  {"per_node_ms", c.per_node_ms},
                                                  {"per_instruction_us", c.per_instruction_us},
                                                  {"per_spill_mib_ms", c.per_spill_mib_ms}};
  for (const auto& [k, v] : terms) {
    std::ostringstream value;
    value << std::setprecision(17) << v * factor;
    out.push_back(key + k + "=" + value.str());
  }
  return out;
}

void add_study_command(CLI::App& app) {
  auto a = std::make_shared<StudyArgs>();
  CLI::App* study = app.add_subcommand("study", "run a study: many runs, one table");
  study->require_subcommand(1);
  add_run_studies(*study);
  CLI::App* cmd = study->add_subcommand(
      "wall", "the compilation wall: start-up, cold and warm steps of each mode, per profile");
  cmd->add_option("--config,-c", a->config, "chip and runtime config (JSON)");
  cmd->add_option("--spec", a->spec, "study spec: workloads, modes, profiles, steps");
  cmd->add_option("--set", a->overrides, "override a config value: path.to.key=value");
  cmd->add_option(
      "--out,-o", a->out,
      "output directory (replaced only if it is an earlier wallsim output: .wallsim-output)");
  cmd->callback([a, cmd] {
    find_default_file(cmd, "--config", &a->config);
    find_default_file(cmd, "--spec", &a->spec);
    const WallSpec spec = read_spec(a->spec);
    const runtime::Config config = runtime::load_config(a->config, a->overrides);
    std::unique_ptr<traces::RunDirectory> dir = sim::open_run_directory(a->out);
    const std::string runs = dir->subdir("runs");
    std::vector<double> factors = {1.0};
    factors.insert(factors.end(), spec.sensitivity.begin(), spec.sensitivity.end());
    std::vector<Point> points;
    for (const auto& workload : spec.workloads) {
      std::string wname = workload.substr(0, workload.find(':'));
      for (const auto& profile : spec.profiles) {
        for (double factor : factors) {
          for (const auto& mode : spec.modes) {
            const std::string name =
                wname + "_" + profile + "_" + mode + (factor == 1.0 ? "" : "_x" + fmt(factor, 2));
            const bool first = profile == spec.profiles.front() && factor == 1.0;
            std::vector<std::string> args = {
                "wallsim",       "run",
                "--config",      a->config,
                "--workload",    workload,
                "--mode",        mode,
                "--out",         runs + "/" + name,
                "--set",         "runtime.compile_cost.profile=\"" + profile + "\"",
                "--trace-level", first ? "plans" : "none"};
            for (const auto& o : a->overrides) {
              args.push_back("--set");
              args.push_back(o);
            }
            for (const std::string& o : compile_cost_overrides(config, profile, factor)) {
              if (o.rfind("runtime.compile_cost.profile=", 0) == 0) continue;  // set above
              args.push_back("--set");
              args.push_back(o);
            }
            if (wname != "decode") {
              args.push_back("--steps");
              args.push_back(std::to_string(spec.steps));
            }
            // The run's own output goes to its log; the study prints one line per run.
            const std::string log = runs + "/" + name + ".log";
            const int rc = run_self(args, log);
            if (rc != 0) {
              throw Failed("study wall: the run of " + workload + " under " + mode + " (" +
                           profile + " profile) failed with exit code " + std::to_string(rc) +
                           ": " + last_line(log));
            }
            Point p;
            p.report = driver::RunReport::read(runs + "/" + name);
            p.workload = workload;
            p.profile = profile;
            p.mode = mode;
            p.factor = factor;
            std::cout << "  " << name << ": " << fmt(p.total_ms(), 1) << " ms\n" << std::flush;
            points.push_back(p);
          }
        }
      }
    }
    // The table: per workload and profile, each mode against the baseline modes.
    const std::vector<const runtime::ExecutionMode*> baselines = runtime::baseline_modes();
    const std::string reference(baselines.front()->name());
    std::string md_vs, md_rule, csv_vs;
    for (const auto* b : baselines) {
      md_vs += " overtakes " + std::string(b->name()) + " after |";
      md_rule += "---|";
      csv_vs += ",overtakes_" + std::string(b->name());
    }
    std::ostringstream md, csv;
    md << "# The compilation wall\n\n"
       << "Config `" << a->config << "`, spec `" << a->spec << "`. Times are simulated. *Cold* is "
       << "the first step, *warm* the median of the steps after the last step that compiled (`-` "
       << "when every step compiled); the warm breakdown is host time by "
       << "state (it sums to the warm step); *device* is the time plans ran. *Tax* is the run's "
       << "total (start-up and every step) over " << reference << "'s. *Overtakes* is the number "
       << "of steps after which the mode has spent less in total than the mode named.\n";
    csv << "workload,profile,mode,startup_ms,cold_ms,warm_ms,warm_dispatch_ms,warm_compile_ms,"
           "warm_transfer_ms,warm_sync_wait_ms,warm_other_ms,warm_device_ms,startup_compiles,"
           "compiles,recompiles,padding_flop_fraction,total_ms,tax_vs_"
        << reference << csv_vs << "\n";
    for (const auto& workload : spec.workloads) {
      for (const auto& profile : spec.profiles) {
        std::vector<const Point*> base(baselines.size(), nullptr);
        for (const auto& p : points) {
          if (p.workload != workload || p.profile != profile || p.factor != 1.0) continue;
          for (size_t b = 0; b < baselines.size(); ++b) {
            if (p.mode == baselines[b]->name()) base[b] = &p;
          }
        }
        const Point* native = base.front();
        md << "\n## " << workload << " (" << profile << " compile profile)\n\n"
           << "| mode | start-up ms | cold ms | warm ms | dispatch | compile | transfer | sync "
              "wait "
              "| other | device | compiles (start-up + steps) | recompiles | padding | tax vs "
           << reference << " |" << md_vs << "\n"
           << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" << md_rule << "\n";
        for (const auto& p : points) {
          if (p.workload != workload || p.profile != profile || p.factor != 1.0) continue;
          const driver::RunReport& r = p.report;
          const std::string tax = native ? fmt(p.total_ms() / native->total_ms(), 2) + "x" : "-";
          std::vector<std::string> vs;
          for (const Point* b : base) vs.push_back(b && b != &p ? r.overtakes(b->report) : "-");
          std::vector<double> warm_state_ms;
          for (int k = 0; k < runtime::kNumHostStates; ++k) {
            const auto state = static_cast<runtime::HostState>(k);
            if (runtime::host_state_always_shown(state))  // the table's five columns
              warm_state_ms.push_back(p.ms(r.warm_host_ns(state)));
          }
          const double startup_ms = p.ms(double(r.startup_ns())),
                       cold_ms = p.ms(double(r.cold_ns()));
          const double warm_ms = p.ms(r.warm_ns()), warm_device_ms = p.ms(r.warm_device_ns());
          const int64_t startup_compiles = r.startup.counts.compiles;
          const int64_t compiles = r.totals.counts.compiles;
          const bool has_warm = !r.warm_steps().empty();
          const auto warm_fmt = [&](double v) { return has_warm ? fmt(v) : std::string("-"); };
          md << "| " << p.mode << " | " << fmt(startup_ms) << " | " << fmt(cold_ms) << " | "
             << warm_fmt(warm_ms) << " | ";
          for (double v : warm_state_ms) md << warm_fmt(v) << " | ";
          md << warm_fmt(warm_device_ms) << " | " << startup_compiles << " + " << (compiles)
             << " | " << r.totals.counts.recompiles << " | "
             << fmt(r.totals.padding_flop_fraction, 3) << " | " << tax << " | " << join(vs, " | ")
             << " |\n";
          csv << '"' << workload << "\"," << profile << "," << p.mode << "," << startup_ms << ","
              << cold_ms << "," << warm_ms;
          for (double v : warm_state_ms) csv << "," << v;
          csv << "," << warm_device_ms << "," << startup_compiles << "," << compiles << ","
              << r.totals.counts.recompiles << "," << r.totals.padding_flop_fraction << ","
              << p.total_ms() << "," << (native ? p.total_ms() / native->total_ms() : 0.0) << ","
              << join(vs, ",") << "\n";
        }
      }
    }
    md << sensitivity_table(points, spec, baselines);
    base::write_file_atomically(dir->file("wall.md"), md.str());
    base::write_file_atomically(dir->file("wall.csv"), csv.str());
    dir->commit();
    std::cout << md.str() << "\n"
              << a->out << ": wall.md, wall.csv, runs/<workload>_<profile>_<mode>/ "
              << "(traces for the " << spec.profiles.front() << " profile)\n";
  });
}

}  // namespace wallsim::cli
