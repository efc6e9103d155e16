// The whole config file: one core (`name`, `arch`, `timing`), the system around it (`chip`,
// `topology`, `links`) plus host/runtime costs (`runtime`). Loading is strict; every error names
// its JSON path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wallsim/base/params.h"
#include "wallsim/compiler_stub/cost_model.h"
#include "wallsim/compiler_stub/graph.h"
#include "wallsim/compiler_stub/lowering_options.h"
#include "wallsim/runtime/materialize.h"
#include "wallsim/sim/chip_config.h"
#include "wallsim/sim/system_config.h"

namespace wallsim::runtime {

// What a fused-eager runtime does with a group that fails to compile.
enum class Fallback : uint8_t { split, eager, fail };
std::string_view name_of(Fallback f);
// What AOT does with a shape beyond its largest bucket.
enum class BeyondBuckets : uint8_t { error, recompile };
std::string_view name_of(BeyondBuckets b);
// Whether a plan of collectives (sends, recvs) only runs beside the plans launched after it.
enum class AsyncCollectives : uint8_t { off, on };
std::string_view name_of(AsyncCollectives a);

// Fused eager (lazy tensor): recording costs, when to flush, how to cut groups.
struct LazyConfig {
  int64_t record_ns_per_op = 2000;  // building one IR node for a recorded op
  int64_t hash_ns_per_node = 200;   // hashing one node into the graph signature at a flush
  int64_t max_pending_ops = 4096;   // buffer limit: a flush when this many ops are pending
  int64_t max_group_ops = 0;        // ops per fused group; 0: no limit
  std::vector<compiler_stub::OpKind> not_fusible;  // ops the fuser leaves in groups of their own
  // The materialization heuristics that cut a flush into groups (materialize.h).
  std::vector<Heuristic> heuristics = default_heuristics();
  int64_t repeat_min_ops = 10;  // the `repeated` heuristic's period window, in ops
  int64_t repeat_max_ops = 128;
  Fallback fallback = Fallback::split;
};

// Ahead-of-time: one whole-step compile per shape bucket, before the first step.
struct AotConfig {
  int64_t bucket_min = 128;  // buckets: powers of two from bucket_min to bucket_max
  int64_t bucket_max = 1024;
  BeyondBuckets beyond = BeyondBuckets::error;
  int64_t key_ns_per_input = 26;  // one input's shape and dtype into a step's cache key
  double cache_load_ms = 100;     // loading one plan from the on-disk cache
  std::string disk_cache;         // directory of compiled plans by signature; empty: none
};

// Compile failures on purpose, to exercise the fallback policies deterministically.
struct InjectConfig {
  std::vector<compiler_stub::OpKind> fail_ops;  // a group of 2+ ops holding one of these fails
  int64_t fail_groups_over = 0;                 // a group of more ops fails; 0: never
};

// The host CPU, for ops a program runs on the host (the host fallback): a roofline of its
// sustained compute and memory bandwidth plus a fixed per-op cost (docs/CALIBRATION.md).
struct HostCpuConfig {
  double gflops = 2000;           // sustained fp32 GFLOP/s of the socket running the op
  double memory_gb_per_s = 160;   // sustained memory bandwidth (STREAM-like), GB/s
  int64_t op_overhead_ns = 5000;  // dispatching one ATen op on the CPU
};

// Host-side costs of the runtime, charged in simulated time.
struct RuntimeConfig {
  int64_t dispatch_ns_per_op = 5000;   // Python-to-runtime dispatch of one eager op
  int64_t kernel_launch_ns = 5000;     // native: launching one library kernel
  int64_t plan_launch_ns = 20000;      // submitting one compiled plan to the device
  int64_t cache_lookup_ns = 500;       // one compile-cache lookup by signature
  int64_t cache_capacity = 1024;       // compiled plans kept in memory (LRU)
  bool compile_in_background = false;  // compiles run on a compiler thread; the host goes on
  // Distributed runs: every rank's plans from one cache (one compile per signature, by the first
  // rank that needs it) or each rank's own (every rank compiles).
  bool shared_compile_cache = true;
  // A launch of collectives only does not hold up the launches after it (a stream of its own);
  // those that read what it writes, or write what it reads, wait for it.
  AsyncCollectives async_collectives = AsyncCollectives::on;
  int64_t seed = 1;  // random inputs, request streams
  compiler_stub::CompileCostConfig compile_cost;
  LazyConfig lazy;
  AotConfig aot;
  InjectConfig inject;
  // An op with no device lowering (a program's host_op) runs on the host CPU, with its
  // transfers; off: the run stops naming the op.
  bool host_fallback = true;
  HostCpuConfig host_cpu;
};

template <class V>
void describe(V& v, HostCpuConfig& c) {
  v.field("gflops", c.gflops, {1e-3, 1e9}, "GFLOP/s",
          "sustained fp32 compute of the host CPU running a fallback op");
  v.field("memory_gb_per_s", c.memory_gb_per_s, {1e-3, 1e9}, "GB/s",
          "sustained host memory bandwidth (STREAM-like)");
  v.field("op_overhead_ns", c.op_overhead_ns, {0, 1000000000}, "ns",
          "fixed host cost of one fallback op (dispatch on the CPU)");
}

template <class V>
void describe(V& v, InjectConfig& c) {
  v.field("fail_ops", c.fail_ops,
          "a fused group holding one of these ops fails to compile (alone, the op compiles)");
  v.field("fail_groups_over", c.fail_groups_over, {0, 100000000}, "ops",
          "a group of more ops fails to compile (as if it did not fit on chip); 0 for never");
}

template <class V>
void describe(V& v, LazyConfig& c) {
  v.field("record_ns_per_op", c.record_ns_per_op, {0, 1000000000}, "ns",
          "host time to record one op into the pending graph");
  v.field("hash_ns_per_node", c.hash_ns_per_node, {0, 1000000000}, "ns",
          "host time to hash one node of a group at a flush");
  v.field("max_pending_ops", c.max_pending_ops, {1, 100000000}, "ops",
          "a flush happens when this many ops are pending");
  v.field("max_group_ops", c.max_group_ops, {0, 100000000}, "ops",
          "largest fused group; 0 for no limit");
  v.field("not_fusible", c.not_fusible, "ops placed in groups of their own");
  v.field("heuristics", c.heuristics,
          "materialization heuristics that cut a flush into groups (docs/RUNTIME.md)");
  v.field("repeat_min_ops", c.repeat_min_ops, {1, 100000}, "ops",
          "shortest period the repeated heuristic looks for");
  v.field("repeat_max_ops", c.repeat_max_ops, {1, 100000}, "ops",
          "longest period the repeated heuristic looks for");
  v.field("fallback", c.fallback, "after a failed group compile: split, eager or fail");
}

template <class V>
void describe(V& v, AotConfig& c) {
  v.field("bucket_min", c.bucket_min, {1, INT64_MAX / 2}, "",
          "smallest shape bucket (buckets are powers of two)");
  v.field("bucket_max", c.bucket_max, {1, INT64_MAX / 2}, "", "largest shape bucket");
  v.field("beyond", c.beyond, "a shape beyond the largest bucket: error or recompile");
  v.field("key_ns_per_input", c.key_ns_per_input, {0, 1000000000}, "ns",
          "host time to put one input's shape into a step's cache key (per run)");
  v.field("cache_load_ms", c.cache_load_ms, {0.0, 1e9}, "ms",
          "loading one compiled plan from the on-disk cache");
  v.field("disk_cache", c.disk_cache,
          "directory of compiled plans kept across runs, by signature; empty for none");
}

template <class V>
void describe(V& v, RuntimeConfig& r) {
  v.field("dispatch_ns_per_op", r.dispatch_ns_per_op, {0, 1000000000}, "ns",
          "host time to dispatch one eager op from Python");
  v.field("kernel_launch_ns", r.kernel_launch_ns, {0, 1000000000}, "ns",
          "native mode: host time to launch one library kernel");
  v.field("plan_launch_ns", r.plan_launch_ns, {0, 1000000000}, "ns",
          "host time to submit one compiled plan");
  v.field("cache_lookup_ns", r.cache_lookup_ns, {0, 1000000000}, "ns",
          "host time of one compile-cache lookup");
  v.field("cache_capacity", r.cache_capacity, {1, 100000000}, "plans",
          "compiled plans kept in memory; least recently used are evicted");
  v.field("compile_in_background", r.compile_in_background,
          "compile on a background compiler thread while the host keeps recording; launches "
          "wait for their compile");
  v.field("shared_compile_cache", r.shared_compile_cache,
          "distributed runs: the ranks share one compile cache (one compile per signature, "
          "charged to the rank that compiles; the others wait for it); false: each rank "
          "compiles its own");
  v.field("async_collectives", r.async_collectives,
          "a plan of collectives, sends and recvs only (a collective under native, eager or "
          "fused with its cuts) runs beside the plans launched after it, as on a stream of its "
          "own; a later plan or host copy that reads what it writes, or writes what it reads or "
          "writes, waits for it. off: every plan waits for the one before");
  v.field("seed", r.seed, {0, INT64_MAX}, "", "seed of every random choice in a run");
  v.section("compile_cost", r.compile_cost, "modelled compile latency, by named profile");
  v.section("lazy", r.lazy, "fused eager: recording, flushes, fusion policy, fallback");
  v.section("aot", r.aot, "ahead-of-time: shape buckets and the on-disk cache");
  v.section("inject", r.inject, "compile failures on purpose, for fallback studies");
  v.field("host_fallback", r.host_fallback,
          "ops with no device lowering (program host_op events) run on the host CPU; false: "
          "the run stops naming the op");
  v.section("host_cpu", r.host_cpu, "the host CPU that runs fallback ops (a roofline)");
}

struct Config {
  sim::ChipConfig chip;      // one core: `name`, `arch`, `timing`
  sim::SystemConfig system;  // `chip`, `topology`, `links`, `collectives`
  RuntimeConfig runtime;
  compiler_stub::LoweringOptions compiler;
};

template <class V>
void describe(V& v, Config& c) {
  v.field("name", c.chip.name, "name of this chip configuration");
  v.section("arch", c.chip.arch, "what the compiler must know about the chip");
  v.section("timing", c.chip.timing, "clocks, latencies, bandwidths and overheads");
  v.section("chip", c.system.chip, "the chip around the cores: how many, their shared HBM");
  v.section("topology", c.system.topology, "how chips are joined: torus, instances");
  v.section("links", c.system.links, "chip-to-chip links and NICs, per direction");
  v.section("collectives", c.system.collectives, "the chips' collective engines and algorithms");
  v.section("runtime", c.runtime, "host-side costs of the runtime");
  v.section("compiler", c.compiler, "the compiler's lowering heuristics (design choices)");
}

// Parses a config document (after overrides): strict, then consistency-checked.
Config config_from_json(const base::Json& j);
// Reads FILE, applies `--set` overrides in order, parses. Errors start with the file, or with
// the `--set` that introduced the bad value, then the JSON path.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// The resolved config with every default filled in.
base::Json to_json(const Config& c);
// JSON Schema of the config file, generated from the same descriptions the loader uses.
base::Json config_schema();
// One row per key: the table in configs/README.md.
std::vector<base::KeyRow> config_keys();

}  // namespace wallsim::runtime

namespace wallsim::base {
template <>
struct EnumTraits<runtime::Fallback> {
  static constexpr int kCount = 3;
};
template <>
struct EnumTraits<runtime::BeyondBuckets> {
  static constexpr int kCount = 2;
};
template <>
struct EnumTraits<runtime::AsyncCollectives> {
  static constexpr int kCount = 2;
};
template <>
struct EnumTraits<compiler_stub::OpKind> {
  static constexpr int kCount = compiler_stub::kNumOps;
};
}  // namespace wallsim::base
