// Child processes of the wallsim command: each simulation point runs in its own process (SystemC
// elaborates once per process). Children die with their parent (PR_SET_PDEATHSIG), so a killed
// sweep or study leaves no orphan writing results.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace wallsim::cli {

// Starts this executable with `args` (args[0] is its display name); stdout and stderr go to
// `log` when not empty (appended), else are inherited. Returns the child's pid, or -1.
pid_t spawn_self(const std::vector<std::string>& args, const std::string& log = "");

// Runs this executable with `args` and waits: its exit code, 128 + signal when killed, -1 when
// it could not start. Its output is appended to `log` when not empty, else inherited.
int run_self(const std::vector<std::string>& args, const std::string& log = "");

// An exit status from waitpid as run_self reports it.
int exit_code_of(int status);

// A pool of child processes (run_all).
struct PoolOptions {
  int jobs = 1;                                 // children at once
  double timeout_s = 0;                         // a child running longer is killed; 0: no limit
  const volatile sig_atomic_t* stop = nullptr;  // when it becomes set: kill the children, stop
};
// Exit codes run_all reports besides a child's own: it could not start, or hit the timeout.
inline constexpr int kNotStarted = -1;
inline constexpr int kTimedOut = -2;

// Runs every command (as run_self), at most `jobs` at once, each with its output appended to
// its log. Calls `done(i, exit_code, seconds)` as each ends; returns the exit codes in order
// (kNotStarted for those a stop left unstarted).
std::vector<int> run_all(const std::vector<std::vector<std::string>>& commands,
                         const std::vector<std::string>& logs, const PoolOptions& options,
                         const std::function<void(size_t, int, double)>& done = {});

}  // namespace wallsim::cli
