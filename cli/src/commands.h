// The wallsim command's subcommands: each `add_*_commands` registers its CLI11 subcommands.
#pragma once

#include <CLI/CLI.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace wallsim::runtime {
struct Config;
}

namespace wallsim::cli {

// Exit codes of the wallsim command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;  // a bug: please report
inline constexpr int kExitBadInput = 2;  // bad config, plan file, arguments or parameters
// The command ran, but some of what it ran failed: sweep points, a study's runs, validate
// checks (each failure has its own line). Distinct from 1, so a script can tell a bug from a
// failed point.
inline constexpr int kExitFailed = 3;

// Ends the command with `code` after it has already printed its own diagnostics.
struct Exit {
  int code;
};

// Ends the command with kExitFailed and the one-line message "wallsim: what()".
struct Failed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void add_config_commands(CLI::App& app);
void add_plan_commands(CLI::App& app);
void add_exec_command(CLI::App& app);
void add_collectives_command(CLI::App& app);  // the simulator's nccl-tests
void add_compile_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_study_command(CLI::App& app);
void add_run_studies(CLI::App& study);   // decode, serving, mask, granularity, fallback
void add_sweep_commands(CLI::App& app);  // sweep, collect
void add_validate_command(CLI::App& app);
void add_validate_shapes_command(CLI::App& validate);  // validate_shapes.cpp
void add_import_command(CLI::App& app);                // import onnx
void add_capture_command(CLI::App& app);               // capture (PyTorch, through python3)
// The --set overrides that select compile-cost `profile` ("neuron" or "xla") with every term of
// its curve in `config` scaled by `factor` (the studies' sensitivity band).
std::vector<std::string> compile_cost_overrides(const runtime::Config& config,
                                                const std::string& profile, double factor);
// A plan file the verifier refuses: its first finding on one line, with how many more there are
// (`all`: every finding, one line each, as `plan check --all` asks), then exit code 2. Nothing
// when `findings` is empty.
void refuse_unverified(const std::string& plan, const std::vector<std::string>& findings, bool all);
// The directory beside graph file G.json that holds its weights' .npy files: G.weights.
std::string weights_dir_of(const std::string& graph);

}  // namespace wallsim::cli
