// Helpers of the end-to-end tests that run the wallsim binary (WALLSIM_BIN) from the source
// tree (WALLSIM_SOURCE_DIR).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace wallsim::test {

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs `wallsim ARGS` from the source tree; its standard error into `err`. The exit code.
inline int run_wallsim(const std::string& args, std::string* err = nullptr) {
  const std::string errfile = ::testing::TempDir() + "/wallsim_err_" + std::to_string(::getpid());
  const std::string cmd = std::string("cd ") + WALLSIM_SOURCE_DIR + " && " + WALLSIM_BIN + " " +
                          args + " >/dev/null 2>" + errfile;
  const int status = std::system(cmd.c_str());
  if (err) *err = slurp(errfile);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A fresh (removed) directory path under the test temp dir, unique to this process.
inline std::string fresh_dir(const std::string& prefix, const std::string& name) {
  const std::string d =
      ::testing::TempDir() + "/" + prefix + "_" + name + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  return d;
}

// Every execution mode, and the host states a rank's wall time splits into (stats.json
// distributed.ranks[]: they sum exactly to wall_ns).
inline const std::vector<std::string> kModes = {"native", "eager", "eager-debug", "fused", "aot"};
inline const char* const kHostStates[] = {"host_dispatch_ns", "compile_ns",   "transfer_ns",
                                          "sync_wait_ns",     "comm_wait_ns", "host_other_ns"};

}  // namespace wallsim::test
