// Runs a simulation in a child process of its own (SystemC elaborates once per process) and
// returns what it produced as JSON: for tests that compare two runs (tests/sim/fold*_test.cpp).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

namespace wallsim::sim::test_util {

// What `run` returned, as JSON (a string "error: ..." when it threw, null when it crashed).
inline nlohmann::ordered_json in_child(const std::function<nlohmann::ordered_json()>& run) {
  int fds[2];
  if (pipe(fds) != 0) return nullptr;
  std::cout.flush();
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string s;
    try {
      s = run().dump();
    } catch (const std::exception& e) {
      s = nlohmann::ordered_json(std::string("error: ") + e.what()).dump();
    }
    for (size_t off = 0; off < s.size();) {
      const ssize_t w = write(fds[1], s.data() + off, s.size() - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return out.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json::parse(out);
}

}  // namespace wallsim::sim::test_util
