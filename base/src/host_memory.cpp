// Host memory available to this process, from /proc and cgroup v2.
#include "wallsim/base/host_memory.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "wallsim/base/params.h"

namespace wallsim::base {

namespace {

// The first integer of a file (cgroup files hold one, or "max"); -1 when absent or "max".
int64_t read_number(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return -1;
  try {
    return std::stoll(word);
  } catch (const std::exception&) {
    return -1;
  }
}

int64_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream fields(line.substr(13));
      int64_t kib = -1;
      if (fields >> kib) return kib * 1024;
    }
  }
  return -1;
}

}  // namespace

int64_t host_memory_available() {
  int64_t avail = mem_available();
  const int64_t limit = read_number("/sys/fs/cgroup/memory.max");
  const int64_t used = read_number("/sys/fs/cgroup/memory.current");
  if (limit > 0 && used >= 0) {
    const int64_t left = std::max<int64_t>(0, limit - used);
    avail = avail < 0 ? left : std::min(avail, left);
  }
  return avail;
}

std::string human_bytes(int64_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (b >= double(int64_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.1f GiB", b / double(int64_t{1} << 30));
  } else {
    std::snprintf(buf, sizeof buf, "%.0f MiB", b / double(1 << 20));
  }
  return buf;
}

void check_host_memory(int64_t need_bytes, const std::string& what,
                       const std::string& override_flag) {
  const int64_t avail = host_memory_available();
  if (avail < 0 || need_bytes <= avail) return;
  throw InputError(what, "needs about " + human_bytes(need_bytes) + " of host memory but " +
                             human_bytes(avail) + " are available (" + override_flag +
                             " runs it anyway)");
}

}  // namespace wallsim::base
