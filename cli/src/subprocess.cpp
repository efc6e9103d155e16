// Child processes: fork + exec of /proc/self/exe, bound to the parent's life.
#include "subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>

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

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::vector<int> run_all(const std::vector<std::vector<std::string>>& commands,
                         const std::vector<std::string>& logs, int jobs,
                         const std::function<void(size_t, int)>& done) {
  std::vector<int> codes(commands.size(), -1);
  std::map<pid_t, size_t> running;
  size_t next = 0;
  while (next < commands.size() || !running.empty()) {
    while (next < commands.size() && static_cast<int>(running.size()) < std::max(1, jobs)) {
      const pid_t pid = spawn_self(commands[next], logs.at(next));
      if (pid < 0) {
        if (done) done(next, -1);
        ++next;
        continue;
      }
      running[pid] = next++;
    }
    if (running.empty()) continue;
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    auto it = running.find(pid);
    if (it == running.end()) continue;
    codes[it->second] = exit_code_of(status);
    if (done) done(it->second, codes[it->second]);
    running.erase(it);
  }
  return codes;
}

int run_self(const std::vector<std::string>& args) {
  const pid_t pid = spawn_self(args);
  if (pid < 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return exit_code_of(status);
}

}  // namespace wallsim::cli
