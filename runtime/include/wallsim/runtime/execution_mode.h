// ExecutionMode: how the runtime turns Tensor API ops into plans (native, eager, eager-debug,
// fused, aot). One file per mode under runtime/src/modes/, listed once in modes/modes.def.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "wallsim/compiler_stub/compile.h"
#include "wallsim/compiler_stub/graph.h"
#include "wallsim/runtime/config.h"
#include "wallsim/runtime/materialize.h"

namespace wallsim::runtime {

// A mode is stateless and shared (one instance per process, from the registry); the Session
// holds every piece of state and asks the mode what to do. Host costs are modelled
// nanoseconds read from the runtime config, never constants of the mode.
class ExecutionMode {
 public:
  virtual ~ExecutionMode() = default;
  // The name in --mode, specs and reports; help for `wallsim run --help`.
  virtual std::string_view name() const = 0;
  virtual std::string_view help() const = 0;
  // The mode this one is a variant of (eager-debug: eager), as the trace metadata names it.
  virtual std::string_view family() const { return name(); }

  // Host cost of one op at dispatch: the framework's dispatch, then recording into a pending
  // graph (charged as two host slices; zero skips one).
  struct OpCost {
    int64_t dispatch_ns = 0;
    int64_t record_ns = 0;
  };
  virtual OpCost op_cost(const RuntimeConfig& r) const = 0;
  // After recording an op with `pending_ops` ops pending: the flush reason, or nullptr.
  virtual const char* flush_after_op(int64_t pending_ops, const RuntimeConfig& r) const = 0;
  // Waits for every op to finish before the next (a debugging eager mode).
  virtual bool sync_every_op() const { return false; }

  // Cuts the ops of a flush (pending-graph node ids, in program order) into groups, each
  // compiled and launched in order.
  virtual std::vector<std::vector<int32_t>> cut(const OpStream& s) const = 0;
  // A group that fails to compile may fall back (runtime.lazy.fallback); otherwise it fails.
  virtual bool falls_back() const { return false; }
  // Groups go through signature hashing, the compile cache and counted compiles (false: library
  // kernels that exist for every shape).
  virtual bool compiles() const { return true; }
  // Compiled plans are kept in and loaded from runtime.aot.disk_cache.
  virtual bool uses_disk_cache() const { return false; }
  // Host cost to launch one group.
  virtual int64_t launch_ns(const RuntimeConfig& r) const { return r.plan_launch_ns; }

  // How a group's compiled plan is found, i.e. what the host pays before the cache lookup
  // (`cache_lookup_ns`) on every run of the group. A lazy-tensor runtime hashes the graph it has
  // just traced, node by node (PyTorch/XLA's graph hash: `lazy.hash_ns_per_node` per node); an
  // ahead-of-time runtime keys its compiled executables by the shapes of the call's inputs
  // (JAX's jit signature, dynamo's tensor guards, NxD's bucket choice: `aot.key_ns_per_input`
  // per input), whatever the size of the graph behind them.
  enum class PlanKey : uint8_t { graph_hash, input_shapes };
  virtual PlanKey plan_key() const { return PlanKey::graph_hash; }
  // The host time of that key for a group of `nodes` ops reading `inputs` tensors.
  int64_t plan_key_ns(const RuntimeConfig& r, int64_t nodes, int64_t inputs) const {
    return plan_key() == PlanKey::graph_hash ? r.lazy.hash_ns_per_node * nodes
                                             : r.aot.key_ns_per_input * inputs;
  }

  // The step is traced and compiled per shape bucket before the first step (Session::startup).
  virtual bool compiles_ahead() const { return false; }
  // Dynamic extents run padded up to a bucket (Session::shape_for).
  virtual bool pads_shapes() const { return false; }
  // Weights are uploaded in the device layout the compiler asks for (Session::weight_layout):
  // a compiler that sees the graph before the weights are used lays out constants ahead (AOT,
  // lazy), and a library whose GEMM reads either operand transposed (cuBLAS's transa/transb)
  // runs a weight's t() as a view; a runtime that compiles each op as it comes cannot.
  virtual bool pre_lays_constants() const { return false; }

  // Studies compare every mode against the baselines (in registry order, the first is the
  // reference of the "tax" column).
  virtual bool is_baseline() const { return false; }
};

// ---- the registry ----
// Every mode, in the order of modes/modes.def.
const std::vector<const ExecutionMode*>& all_modes();
// The mode named `name`, or nullptr.
const ExecutionMode* find_mode(std::string_view name);
// The mode named `name`; an unknown name throws base::InputError at `path`, listing the modes.
const ExecutionMode& mode_named(std::string_view name, const std::string& path = "--mode");
// The baseline modes, in registry order.
std::vector<const ExecutionMode*> baseline_modes();
// The mode a run uses when none is named.
const ExecutionMode& default_mode();
// The names, in registry order.
std::vector<std::string> mode_names();
// "native, eager, ...": for error messages.
std::string mode_list();
// One line per mode: "name - help".
std::string mode_help();

}  // namespace wallsim::runtime
