// Host memory available to this process, from /proc and cgroup v2.
#include "wallsim/base/host_memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
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

// A field of /proc/self/status in bytes ("VmSize:  1234 kB"); -1 when absent.
int64_t status_bytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      std::istringstream fields(line.substr(key.size()));
      int64_t kib = -1;
      if (fields >> kib) return kib * 1024;
    }
  }
  return -1;
}

// The address-space limit (ulimit -v); -1 when unlimited.
int64_t address_space_limit() {
  struct rlimit r {};
  if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return -1;
  return static_cast<int64_t>(std::min<rlim_t>(r.rlim_cur, INT64_MAX));
}

}  // namespace

int64_t host_memory_available() {
  int64_t avail = mem_available();
  auto take = [&avail](int64_t left) {
    left = std::max<int64_t>(0, left);
    avail = avail < 0 ? left : std::min(avail, left);
  };
  const int64_t limit = read_number("/sys/fs/cgroup/memory.max");
  const int64_t used = read_number("/sys/fs/cgroup/memory.current");
  if (limit > 0 && used >= 0) take(limit - used);
  const int64_t as_limit = address_space_limit();
  const int64_t vm_size = status_bytes("VmSize");
  if (as_limit >= 0 && vm_size >= 0) take(as_limit - vm_size);
  return avail;
}

std::string host_memory_limit_text() {
  std::string s;
  auto add = [&s](const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
  // Peaks: by the time the failure is reported, unwinding has freed much of what was held.
  const int64_t peak_rss = status_bytes("VmHWM"), peak_vm = status_bytes("VmPeak");
  if (peak_rss >= 0) add("peak resident " + human_bytes(peak_rss));
  if (const int64_t as = address_space_limit(); as >= 0) {
    add("peak address space " + human_bytes(std::max<int64_t>(peak_vm, 0)) + " of its limit " +
        human_bytes(as) + " (ulimit -v)");
  }
  const int64_t limit = read_number("/sys/fs/cgroup/memory.max");
  if (limit > 0) add("cgroup limit " + human_bytes(limit));
  if (const int64_t avail = mem_available(); avail >= 0) add(human_bytes(avail) + " available");
  return s;
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

int64_t memory_maps_needed(int64_t threads, int64_t maps_now) {
  return std::max<int64_t>(maps_now, 0) + 2 * threads + kSpareMaps;
}

void check_memory_maps(int64_t threads, int64_t maps_now, int64_t limit, const std::string& what) {
  const int64_t need = memory_maps_needed(threads, maps_now);
  if (limit < 0 || need <= limit) return;
  throw InputError(what, "its " + std::to_string(threads) + " SystemC threads need about " +
                             std::to_string(need) +
                             " memory maps (a stack and a guard page each) but vm.max_map_count "
                             "is " +
                             std::to_string(limit) +
                             "; simulate fewer ranks or raise it (sysctl -w vm.max_map_count=" +
                             std::to_string(2 * need) + ")");
}

namespace {
int64_t g_thread_budget = -1, g_threads_taken = 0, g_map_limit = -1;
}  // namespace

void set_thread_budget(int64_t threads, int64_t limit) {
  g_thread_budget = threads;
  g_threads_taken = 0;
  g_map_limit = limit;
}

bool take_thread() {
  if (g_thread_budget >= 0 && g_threads_taken >= g_thread_budget) return false;
  ++g_threads_taken;
  return true;
}

std::string thread_budget_text() {
  return "its DMA queues need more SystemC threads than the " + std::to_string(g_thread_budget) +
         " that vm.max_map_count (" + std::to_string(g_map_limit) +
         ") leaves once the simulation has started (a stack and a guard page each); simulate "
         "fewer ranks or raise it (sysctl -w vm.max_map_count=" +
         std::to_string(2 * std::max<int64_t>(g_map_limit, 0)) + ")";
}

int64_t memory_maps_now() {
  std::ifstream in("/proc/self/maps");
  if (!in) return -1;
  int64_t lines = 0;
  std::string line;
  while (std::getline(in, line)) ++lines;
  return lines;
}

int64_t memory_maps_limit() { return read_number("/proc/sys/vm/max_map_count"); }

}  // namespace wallsim::base
