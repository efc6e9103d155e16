// The whole config file: the chip (`name`, `arch`, `timing`) plus host/runtime costs
// (`runtime`). Loading is strict; every error names its JSON path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wallsim/compiler_stub/cost_model.h"
#include "wallsim/isa/params.h"
#include "wallsim/sim/chip_config.h"

namespace wallsim::runtime {

// Host-side costs of the runtime, charged in simulated time.
struct RuntimeConfig {
  int64_t dispatch_ns_per_op = 5000;  // Python-to-kernel dispatch of one eager op
  int64_t seed = 1;                   // random inputs, request streams
  compiler_stub::CompileCostConfig compile_cost;
};

struct Config {
  sim::ChipConfig chip;
  RuntimeConfig runtime;
};

template <class V>
void describe(V& v, RuntimeConfig& r) {
  v.field("dispatch_ns_per_op", r.dispatch_ns_per_op, {0, 1000000000}, "ns",
          "host time to dispatch one eager op from Python");
  v.field("seed", r.seed, {0, INT64_MAX}, "", "seed of every random choice in a run");
  v.section("compile_cost", r.compile_cost, "modelled compile latency, by named profile");
}

template <class V>
void describe(V& v, Config& c) {
  v.field("name", c.chip.name, "name of this chip configuration");
  v.section("arch", c.chip.arch, "what the compiler must know about the chip");
  v.section("timing", c.chip.timing, "clocks, latencies, bandwidths and overheads");
  v.section("runtime", c.runtime, "host-side costs of the runtime");
}

// Parses a config document (after overrides): strict, then consistency-checked.
Config config_from_json(const isa::Json& j);
// Reads FILE, applies `--set` overrides in order, parses. Errors start with the file, or with
// the `--set` that introduced the bad value, then the JSON path.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// The resolved config with every default filled in.
isa::Json to_json(const Config& c);
// JSON Schema of the config file, generated from the same descriptions the loader uses.
isa::Json config_schema();
// One row per key: the table in configs/README.md.
std::vector<isa::KeyRow> config_keys();

}  // namespace wallsim::runtime
