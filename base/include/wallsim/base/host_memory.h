// Up-front host memory estimates: when a run would exhaust the host, wallsim says so before the
// work starts (exit code 2) instead of ending in bad_alloc or the OOM killer.
#pragma once

#include <cstdint>
#include <string>

namespace wallsim::base {

// Bytes this process may still allocate: the smallest of MemAvailable (/proc/meminfo), the
// cgroup v2 limit less its usage (/sys/fs/cgroup/memory.max, memory.current) and the
// address-space limit (RLIMIT_AS, ulimit -v) less the process's VmSize; -1 when unknown.
int64_t host_memory_available();

// This process's memory and the limits on it, for a message after an allocation failed: "peak
// resident 1.2 GiB, peak address space 3.8 GiB of its limit 3.8 GiB (ulimit -v), 20.1 GiB
// available" (peaks: unwinding has freed much of what was held by the time this is asked).
std::string host_memory_limit_text();

// Throws InputError(what, ...) when `need_bytes` exceeds host_memory_available(), naming the
// estimate, what is available and `override_flag` (which skips the check).
void check_host_memory(int64_t need_bytes, const std::string& what,
                       const std::string& override_flag);

// Memory maps (vm.max_map_count) a simulation of `threads` SystemC threads needs on top of the
// `maps_now` the process has: SystemC gives each thread a stack mapping and a guard page, which
// is two maps, and kSpareMaps are left for what the run maps later (allocator arenas, the
// collective processes spawned during the run).
inline constexpr int64_t kSpareMaps = 4096;
int64_t memory_maps_needed(int64_t threads, int64_t maps_now);
// Throws InputError(what, ...) naming the threads, the maps and `limit` when
// memory_maps_needed() exceeds it; no check when `limit` < 0 (unknown).
void check_memory_maps(int64_t threads, int64_t maps_now, int64_t limit, const std::string& what);
// The SystemC threads a started simulation may still spawn (a DMA queue's on its first stream):
// simulate() sets the budget from the maps left under the limit after its elaborated threads
// (-1: unlimited, the default); take_thread() takes one, false once it is spent, and
// thread_budget_text() says why, for the one-line error.
void set_thread_budget(int64_t threads, int64_t limit);
bool take_thread();
std::string thread_budget_text();
// This process's memory maps (/proc/self/maps lines) and the limit on them
// (/proc/sys/vm/max_map_count); -1 when unknown.
int64_t memory_maps_now();
int64_t memory_maps_limit();

// Estimates below this are not worth a check (reading /proc costs more than they could take).
inline constexpr int64_t kUncheckedHostBytes = int64_t{256} << 20;

// "1.5 GiB", "300 MiB": for messages.
std::string human_bytes(int64_t bytes);

}  // namespace wallsim::base
