// Session: the host runtime of one rank. Workload code calls the Tensor API from a host
// SC_THREAD; every runtime action costs modelled host time in the same simulation as the
// device. The execution mode (an ExecutionMode, execution_mode.h) decides when ops become
// plans, how they are grouped, which compile curve they pay and what each op costs the host.
// The session records ops, cuts groups (with their fallback) and coordinates four parts, each
// holding its own state: the compile service (compile_service.h), the device queue
// (device_queue.h), the host timeline (host_timeline.h) and the step log (step_log.h).
//
// Host time is always in exactly one HostState; the states of a step sum to its wall time.
#pragma once

#include <systemc>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "wallsim/compiler_stub/compile.h"
#include "wallsim/compiler_stub/graph.h"
#include "wallsim/compiler_stub/reference.h"
#include "wallsim/compiler_stub/weight_layouts.h"
#include "wallsim/runtime/compile_cache.h"
#include "wallsim/runtime/compile_service.h"
#include "wallsim/runtime/config.h"
#include "wallsim/runtime/device_queue.h"
#include "wallsim/runtime/execution_mode.h"
#include "wallsim/runtime/host_clock.h"
#include "wallsim/runtime/host_timeline.h"
#include "wallsim/runtime/process_group.h"
#include "wallsim/runtime/runtime_error.h"
#include "wallsim/runtime/step_log.h"
#include "wallsim/sim/launch_handle.h"
#include "wallsim/sim/system.h"
#include "wallsim/traces/trace_sink.h"

namespace wallsim::runtime {

class Session;

// A device-side value: materialised in HBM, or pending in a lazy graph.
struct TensorImpl {
  Session* session = nullptr;
  compiler_stub::TensorType type;
  std::string device;          // HBM tensor name once materialised
  int32_t pending = -1;        // node id in the session's pending graph, until materialised
  sim::LaunchHandle producer;  // the launch that writes it
  bool queued = false;         // its launch waits for a background compile
  std::shared_ptr<TensorImpl> alias_of;  // shares that tensor's storage (a KV append)
  int32_t ref = -1;                      // node in the session's reference graph (functional runs)
  // How the storage holds the value: as given, or (a pre-laid weight) permuted, possibly after
  // a reshape; `type` is always the value as the workload sees it.
  compiler_stub::WeightLayout layout;
  ~TensorImpl();
  // The HBM tensor holding the value (its own, or the one it aliases).
  const std::string& storage() const { return alias_of ? alias_of->storage() : device; }
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> p) : m_p(std::move(p)) {}
  const compiler_stub::TensorType& type() const { return m_p->type; }
  std::vector<int64_t> shape() const;
  isa::DType dtype() const { return m_p->type.dtype; }
  Session& session() const { return *m_p->session; }
  const std::shared_ptr<TensorImpl>& impl() const { return m_p; }
  bool valid() const { return m_p != nullptr; }

 private:
  std::shared_ptr<TensorImpl> m_p;
};

struct SessionOptions {
  const ExecutionMode* mode = &default_mode();
  bool functional = false;
  // Functional runs: also record every upload and op into one reference graph, so any value
  // can be checked against the reference evaluator (tests; costs host memory).
  bool keep_reference = false;
  // Simulator memory, not a modelled quantity: bytes of compiled plan bodies kept for cache
  // hits. Over it the least recently used bodies are dropped and rebuilt on their next hit
  // (same plan, so the same results; only the real run time changes).
  int64_t plan_memory_bytes = int64_t{2} << 30;
  // Called after each step's record is complete (the driver streams it to its output and
  // prints progress lines); not a model input.
  std::function<void(const StepRecord&)> on_step_end;
  // Whether steps() keeps every step's record. A long run's driver takes them from on_step_end
  // instead, so the session's memory does not grow with the steps.
  bool keep_steps = true;
  // Before lowering a group, check that the host can hold its plan: a lower bound on its
  // instructions (from the group's MACs) times the simulator's bytes per instruction, against
  // base::host_memory_available(). Over it, the run stops with an InputError (exit 2) naming the
  // estimate, before the work. `run --no-memory-check` turns it off.
  bool memory_check = true;
  // ---- a rank of a distributed run (process_group.h); the defaults are a run of one ----
  // Its place, parallel coordinates and communicators (collective ops name them: "tp", "dp").
  RankContext rank;
  // The plans every rank shares (runtime.shared_compile_cache): one compile per signature, by
  // the first rank that needs it; null: this rank's cache is its own.
  std::shared_ptr<SharedPlans> shared_plans;
  // The system's collective engines: the rank's sync waits while its core is blocked in a
  // collective become comm_wait at each step's end (null: no collectives).
  const sim::CollectiveEngine* collectives = nullptr;
  // Its HBM tensors' names start with this (ranks on one chip share its tensor store).
  std::string name_prefix;
  // Its host tracks' trace process.
  int trace_pid = 0;
  std::string trace_process = "host";
};

// Attribute map for a recorded op.
using Attrs = std::map<std::string, compiler_stub::AttrValue>;

// Where recorded ops come from: a layer or module path ("blocks.3.attn", "" at top level) and
// the source op a front end lowered (an ATen op such as "aten.addmm.default"; "" for none).
struct Origin {
  std::string module;
  std::string source;
  bool operator<(const Origin& o) const {
    return module != o.module ? module < o.module : source < o.source;
  }
};

class Session {
 public:
  Session(const Config& config, sim::Core& device, SessionOptions options,
          traces::TraceSink* trace = nullptr);
  ~Session();

  const ExecutionMode& mode() const { return *m_options.mode; }
  // Dynamic extents run padded up to a shape bucket (the mode's choice): workloads ask this
  // instead of naming a mode.
  bool pads_shapes() const { return m_options.mode->pads_shapes(); }
  bool functional() const { return m_options.functional; }
  // This rank's place in a distributed run (a run of one: rank 0 of 1, no communicators).
  const RankContext& rank() const { return m_options.rank; }
  // Whether plans come from the ranks' shared compile cache.
  bool shares_plans() const { return m_options.shared_plans != nullptr; }
  // Time this rank's core spent blocked in collectives (from its arrival to the end), summed
  // over the steps: the device side of exposed communication.
  int64_t collective_ns() const { return m_collective_ns; }
  const Config& config() const { return m_config; }
  // The core this session launches on.
  sim::Core& device_core() { return m_device.core(); }

  // ---- tensors ----
  // The device layout of a weight of `type` whose readers are `consumers` (every op of the
  // program that reads it), asked once before its upload: the compiler's choice
  // (compiler_stub::choose_weight_layout) when the mode pre-lays constants
  // (ExecutionMode::pre_lays_constants), otherwise as given.
  // `readers_of` (optional) gives the readers of the consumers' values, so a chain of
  // layout-only ops (a reshape, then a transpose) can be pre-laid too.
  compiler_stub::WeightLayout weight_layout(
      const compiler_stub::TensorType& type,
      const std::vector<const compiler_stub::Node*>& consumers,
      const compiler_stub::ReadersOf& readers_of = {}) const;
  // Uploads below take the layout the value is stored in (as given by default). A pre-laid
  // tensor's values are permuted on the host as they are uploaded (its bytes read and written at
  // runtime.host_cpu.memory_gb_per_s, once); the ops of its layout recorded on it in order (the
  // reshape, if any, then the transpose with the layout's permutation) are then views of the
  // stored tensor, with no op, and any other read of it goes through the ops that undo the
  // layout.
  // A device tensor with seeded random values, uploaded from the host (a transfer).
  Tensor upload_random(const std::vector<int64_t>& shape, isa::DType dtype, uint64_t seed,
                       const compiler_stub::WeightLayout& layout = {});
  // Elements [start, limit) along `axis` of the tensor upload_random(full, dtype, seed) would
  // upload: a rank's shard of a weight, equal to the unsharded run's slice of it.
  Tensor upload_random_slice(const std::vector<int64_t>& full, isa::DType dtype, uint64_t seed,
                             int64_t axis, int64_t start, int64_t limit);
  // A device tensor with the given values (row-major floats), uploaded from the host.
  Tensor upload(const std::vector<int64_t>& shape, isa::DType dtype,
                const std::vector<float>& values, const compiler_stub::WeightLayout& layout = {});
  // A device tensor from a `.npy` file (float32, float16 or int32 arrays), stored as `dtype`.
  // Throws base::InputError naming the file for anything it cannot read.
  Tensor upload_npy(const std::string& path, isa::DType dtype,
                    const compiler_stub::WeightLayout& layout = {});
  // Records or runs one op (by the mode). Shapes are checked at once: a bad op throws
  // base::InputError naming it.
  Tensor op(compiler_stub::OpKind kind, const std::vector<Tensor>& inputs, Attrs attrs = {},
            std::optional<isa::DType> dtype = std::nullopt, const std::string& name = "");
  // iota (no inputs): values along `axis`.
  Tensor iota(const std::vector<int64_t>& shape, isa::DType dtype, int64_t axis);
  // Waits for the value and copies it to the host: a flush, a sync wait, a transfer.
  compiler_stub::HostTensor to_host(const Tensor& t);
  // Flush point of a lazy runtime (fused: the pending graph is compiled and launched).
  void mark_step();
  // A flush, then waits until every launch so far (of the current step, or since the start
  // outside a step) has drained: a model load's end, before the first step.
  void synchronize();
  // A split point: under the marked_split heuristic, a fused group ends after the last op
  // recorded so far (no flush).
  void mark_split();
  // Run-time scalars (a KV append's position, a bounded dim's extent): declared once with
  // their range, set before the ops that use them are launched.
  void declare_scalar(const std::string& name, int64_t min, int64_t max);
  void set_scalar(const std::string& name, int64_t value) {
    if (!m_count) m_scalar_values[name] = value;
  }

  // ---- provenance ----
  // Ops recorded from now on come from `origin` (until the next set_origin or clear_origin).
  // Every launch carries each node's origin, so a cached plan shared by many layers still
  // reports per layer: origin_totals() folds device time and bytes by origin.
  void set_origin(const Origin& origin);
  void clear_origin() {
    if (!m_count) m_current_origin = -1;
  }
  // Every origin set, by index (origin_totals' keys).
  const std::vector<Origin>& origins() const { return m_origins; }
  // Device totals of drained launches by origin index (sim::Core::OpTotals; exposed_ns
  // shares each instant of a launch equally among the nodes running then).
  const std::map<int32_t, sim::Core::OpTotals>& origin_totals() const;

  // ---- host compute ----
  // Work the host CPU does itself (an op with no device lowering): `flops` and `bytes` at
  // runtime.host_cpu's rates (a roofline) plus its per-op overhead, charged as host_other time.
  // Returns the ns charged.
  int64_t host_compute(double flops, double bytes);

  // ---- steps ----
  // AOT: `trace(bucket)` records one step at that bucket's shape; called once per bucket
  // before the first step, under `startup`. Other modes: nothing.
  void startup(const std::vector<int64_t>& buckets, const std::function<void(int64_t)>& trace);
  // The shape a dynamic extent runs at: AOT pads to the smallest bucket >= real (beyond the
  // largest: an error or a new bucket, by `aot.beyond`); other modes run the real extent.
  int64_t shape_for(int64_t real);
  void begin_step(int64_t index);
  // Flushes, waits until the step's device work drains, and closes the step's record.
  void end_step();
  // Between steps: the host has nothing to do until `ns` (a server waiting for requests). The
  // time is idle, in no step's record (idle_ns() sums it).
  void idle_until(int64_t ns);
  // Between steps: idle while `pending()` holds, woken by `signal` (another rank's host thread
  // notifies it when what this one waits for is there).
  void idle_while(const std::function<bool()>& pending, HostSignal& signal);
  int64_t idle_ns() const { return m_log.idle_ns(); }
  // The MACs of the step at its real shapes (a padded AOT step reports what it wastes): the
  // count_macs of the step recorded at them.
  void add_real_macs(double macs) {
    refuse_counting("add_real_macs");
    m_log.add_real_macs(macs);
  }

  // ---- counting (mac_count.cpp) ----
  // Runs `record` (workload code on this session) as a shape-only recording and returns the
  // multiply-accumulates of the ops it records (compiler_stub::node_macs). While it runs, op(),
  // iota, the uploads, collectives, sends and recvs make tensors that carry only their type,
  // inferred and checked by compiler_stub's shape rules as a recorded op's is. Nothing is
  // uploaded, compiled, launched, charged to host time, traced, logged in the step's record or
  // kept in the reference graph; set_scalar, the origins, mark_step, mark_split and synchronize
  // do nothing (declare_scalar declares for the recording's shape checks only); shape_for
  // returns the real extent; to_host and the step calls throw std::logic_error. Its tensors
  // are for ops inside it only (a recorded op outside refuses them).
  double count_macs(const std::function<void()>& record);

  // The reference evaluator's value of `t` (keep_reference only).
  compiler_stub::HostTensor reference(const Tensor& t) const;

  const StepRecord& startup_record() const { return m_log.startup(); }
  // Every finished step's record (empty unless SessionOptions::keep_steps).
  const std::vector<StepRecord>& steps() const { return m_log.steps(); }
  int64_t steps_done() const { return m_log.steps_done(); }
  Counts totals() const { return m_log.totals(); }
  int64_t now_ns() const { return HostTimeline::now_ns(); }
  // Real (not simulated) seconds compiler_stub spent compiling: measured, varies run to run.
  double compiler_seconds() const { return m_compiler.compiler_seconds(); }
  // Plan bodies rebuilt after plan_memory_bytes dropped them (measured, like the above).
  int64_t bodies_rebuilt() const { return m_compiler.bodies_rebuilt(); }
  // What the tuning cache answered this session's compiles; null when the run names none.
  const TuningStats* tuning_stats() const { return m_compiler.tuning_stats(); }
  // Host time the ops' own calls cost (dispatch and record), by op kind, startup included.
  const std::map<std::string, int64_t>& host_ns_by_op() const { return m_host_ns_by_op; }
  // Every plan compiled, in compile order, with its lookups; every recompile with its reason.
  const std::vector<CacheEntryRecord>& cache_entries() const { return m_compiler.entries(); }
  const std::vector<RecompileRecord>& recompile_log() const { return m_compiler.recompile_log(); }
  // Every group that failed to compile and fell back, in order.
  const std::vector<FallbackRecord>& fallback_log() const { return m_fallbacks; }

  // After the simulation: draws the trace's flows from each launch on the host to the plan's
  // launch on the device.
  void finish_trace();

  // Frees a device tensor (TensorImpl's destructor).
  void release(TensorImpl& t);

 private:
  struct Group;
  class MacCount;
  // In count_macs: the op, upload and scalar declaration of a shape-only recording.
  Tensor count_op(compiler_stub::OpKind kind, const std::vector<Tensor>& inputs, Attrs attrs,
                  std::optional<isa::DType> dtype);
  Tensor count_upload(const std::vector<int64_t>& shape, isa::DType dtype);
  void count_scalar(const std::string& name, int64_t min, int64_t max);
  // Throws std::logic_error naming `call` inside count_macs.
  void refuse_counting(const char* call) const;
  void flush(const char* reason);
  void run_group(const std::vector<int32_t>& nodes, bool allow_fallback);
  void launch_group(const Group& g, const std::shared_ptr<CompiledPlan>& c, int64_t compile_ns);
  void wait_launched(const TensorImpl* t);   // a held launch: waits for the compiler
  std::shared_ptr<TensorImpl> new_tensor();  // owned by this session, detached when it ends
  // A pre-laid tensor's storage as a tensor of its own (the stored type, no layout).
  Tensor stored_view(const Tensor& t);
  // A pre-laid tensor with a reshape in its layout, reshaped: a view of the same storage whose
  // layout is the transpose left.
  Tensor reshaped_view(const Tensor& t);
  // A pre-laid tensor's value as given: the ops that undo its layout, on its storage.
  Tensor undo_layout(const Tensor& t);
  StepRecord& record() { return m_log.record(); }
  // At a step's end: the step's sync waits while the core was blocked in a collective move
  // to comm_wait (session_ranks.cpp).
  void split_comm_wait();

  Config m_config;
  SessionOptions m_options;
  traces::TraceSink* m_trace;
  // The four parts (in this order: each refers to the ones before).
  StepLog m_log;
  HostTimeline m_host;
  DeviceQueue m_device;
  CompileService m_compiler;

  std::vector<FallbackRecord> m_fallbacks;

  // Pending lazy graph and the live tensors its nodes produce.
  compiler_stub::Graph m_pending;
  std::unordered_map<int32_t, std::weak_ptr<TensorImpl>> m_pending_out;
  std::unordered_map<std::string, int32_t> m_pending_inputs;  // device name -> input node
  std::unordered_map<int32_t, std::shared_ptr<TensorImpl>> m_input_impl;  // input node -> tensor
  int64_t m_pending_ops = 0;
  std::set<int32_t> m_split_marks;  // pending ids a split point follows (mark_split)
  std::vector<std::shared_ptr<TensorImpl>> m_flush_hold;
  std::vector<std::weak_ptr<TensorImpl>> m_tensors;  // every tensor made, to detach at the end
  size_t m_tensors_pruned = 0;
  int32_t m_next_node = 0;
  std::map<std::string, int64_t> m_scalar_values;
  std::vector<Origin> m_origins;
  std::map<Origin, int32_t> m_origin_index;
  int32_t m_current_origin = -1;
  std::unordered_map<int32_t, int32_t> m_node_origin;  // pending node id -> origin index
  std::map<std::string, int64_t> m_host_ns_by_op;
  size_t m_step_first_launch = 0;
  // The core's exposed communication so far, in whole ns (sim/comm_overlap.h).
  int64_t exposed_comm_ns();
  int64_t m_step_exposed_from_ns = 0;  // the core's exposed communication when the step began
  std::vector<int64_t> m_aot_buckets;
  bool m_tracing = false;                     // AOT startup: recording a bucket's step
  MacCount* m_count = nullptr;                // count_macs: a shape-only recording
  size_t m_collectives_seen = 0;              // engine records already looked at
  std::optional<traces::Track> m_comm_track;  // the comm_wait slices (traced ranks)
  int64_t m_collective_ns = 0;
  compiler_stub::Graph m_ref;  // keep_reference: every upload and op
  std::map<std::string, compiler_stub::HostTensor> m_ref_inputs;
};

// One rank's host thread: its body (the workload's host code, on its Session) and the core
// its Session launches on.
struct HostRank {
  sim::Core* device = nullptr;
  std::function<void()> body;
};
// Runs each rank's body in a host SC_THREAD of its own ("host" for one rank, "host_<r>" for
// more) and simulates until every rank has ended. Throws what a body throws (the first rank's,
// in rank order; an error stops the simulation at once), or sim::SimulationError when a device
// could not finish or a rank never ended.
void run_hosts(const std::vector<HostRank>& ranks);
// One rank on `device`: run_hosts({{&device, body}}).
void run_host(sim::Core& device, const std::function<void()>& body);

}  // namespace wallsim::runtime
