// Child processes: fork + exec of /proc/self/exe, bound to the parent's life.
#include "subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

namespace wallsim::cli {

pid_t spawn_self(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid != 0) return pid;  // the parent (or -1)
  // The child: dies with its parent, even when the parent is killed with SIGKILL.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);  // the parent died before prctl took effect
  if (!log.empty()) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
  }
  execv("/proc/self/exe", argv.data());
  _exit(127);
}

namespace {
// Stops a child: SIGTERM first, so a `wallsim run` removes its staging directory, then SIGKILL
// when it has not exited within a second.
void stop_children(const std::vector<pid_t>& pids) {
  for (pid_t p : pids) kill(p, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  std::vector<pid_t> left = pids;
  while (!left.empty() && std::chrono::steady_clock::now() < deadline) {
    left.erase(std::remove_if(left.begin(), left.end(),
                              [](pid_t p) { return waitpid(p, nullptr, WNOHANG) == p; }),
               left.end());
    if (!left.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (pid_t p : left) kill(p, SIGKILL);
  for (pid_t p : left) waitpid(p, nullptr, 0);
}
}  // namespace

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::vector<int> run_all(const std::vector<std::vector<std::string>>& commands,
                         const std::vector<std::string>& logs, const PoolOptions& options,
                         const std::function<void(size_t, int, double)>& done) {
  using Clock = std::chrono::steady_clock;
  struct Running {
    size_t index;
    Clock::time_point start;
  };
  auto seconds = [](const Running& r) {
    return std::chrono::duration<double>(Clock::now() - r.start).count();
  };
  auto stopped = [&] { return options.stop && *options.stop; };
  std::vector<int> codes(commands.size(), kNotStarted);
  std::map<pid_t, Running> running;
  auto finish = [&](pid_t pid, int code) {
    const Running r = running.at(pid);
    running.erase(pid);
    codes[r.index] = code;
    if (done) done(r.index, code, seconds(r));
  };
  size_t next = 0;
  while ((next < commands.size() || !running.empty()) && !stopped()) {
    while (next < commands.size() && static_cast<int>(running.size()) < std::max(1, options.jobs)) {
      const size_t i = next++;
      const pid_t pid = spawn_self(commands[i], logs.at(i));
      if (pid < 0) {
        if (done) done(i, kNotStarted, 0);
        continue;
      }
      running[pid] = {i, Clock::now()};
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0 && running.count(pid)) {
      finish(pid, exit_code_of(status));
      continue;
    }
    if (options.timeout_s > 0) {  // the child is killed and reported; the others go on
      std::vector<pid_t> late;
      for (const auto& [p, r] : running) {
        if (seconds(r) > options.timeout_s) late.push_back(p);
      }
      stop_children(late);
      for (pid_t p : late) finish(p, kTimedOut);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::vector<pid_t> left;  // stopped: nothing outlives the pool
  for (const auto& [p, r] : running) left.push_back(p);
  stop_children(left);
  return codes;
}

int run_self(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = spawn_self(args, log);
  if (pid < 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return exit_code_of(status);
}

}  // namespace wallsim::cli
