// `wallsim capture SCRIPT.py --out P.json [--values | --meta] [--name NAME] [-- ARGS...]`: runs a
// PyTorch script as __main__ under the capture (frontends/torch/python, the `wallsim` Python
// package) and writes its program file (docs/PROGRAM_FORMAT.md). The work is Python's: this command
// execs $WALLSIM_PYTHON (default /usr/bin/python3, Debian's, which has python3-torch) with the
// package on PYTHONPATH; the helper reports bad input as one line and exit code 2.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"

#ifndef WALLSIM_TORCH_PYTHON_DIR
#error "WALLSIM_TORCH_PYTHON_DIR (frontends/torch/python) must be defined by the build"
#endif

namespace wallsim::cli {

void add_capture_command(CLI::App& app) {
  struct Args {
    std::string script, out, name;
    bool values = false, meta = false;
    std::vector<std::string> script_args;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "capture",
      "run a PyTorch script under capture and write its program file (ATen ops as "
      "graph ops, reads, steps; docs/PROGRAM_FORMAT.md)");
  cmd->add_option("script", a->script, "the Python script, run as __main__")->required();
  cmd->add_option("--out,-o", a->out, "program file to write (JSON)")->required();
  cmd->add_flag("--values", a->values,
                "also write weights, inputs and every read's PyTorch value as .npy in "
                "P.values/ beside P.json (for a functional replay)");
  cmd->add_flag("--meta", a->meta,
                "timing-only: run the ATen ops on meta tensors (shapes and dtypes, no data), so "
                "no PyTorch compute runs; reads give the script zeros");
  cmd->add_option("--name", a->name, "the program's name (default: the script's stem)");
  cmd->add_option("args", a->script_args, "the script's own arguments (after --)");
  cmd->callback([a] {
    const char* env = std::getenv("WALLSIM_PYTHON");
    const std::string python = env && *env ? env : "/usr/bin/python3";
    if (access(python.c_str(), X_OK) != 0) {
      std::cerr << "wallsim capture: cannot run " << python
                << " (set WALLSIM_PYTHON to a python3 with torch)\n";
      throw Exit{kExitBadInput};
    }
    std::string path = WALLSIM_TORCH_PYTHON_DIR;
    if (const char* old = std::getenv("PYTHONPATH"); old && *old) path += std::string(":") + old;
    setenv("PYTHONPATH", path.c_str(), 1);
    std::vector<std::string> args = {python,    "-m",    "wallsim", "capture",
                                     a->script, "--out", a->out};
    if (a->values) args.push_back("--values");
    if (a->meta) args.push_back("--meta");
    if (!a->name.empty()) {
      args.push_back("--name");
      args.push_back(a->name);
    }
    args.push_back("--");
    args.insert(args.end(), a->script_args.begin(), a->script_args.end());
    std::vector<char*> argv;
    for (std::string& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    std::cout.flush();
    execv(python.c_str(), argv.data());
    std::cerr << "wallsim capture: cannot run " << python << ": " << std::strerror(errno) << "\n";
    throw Exit{kExitBadInput};
  });
}

}  // namespace wallsim::cli
