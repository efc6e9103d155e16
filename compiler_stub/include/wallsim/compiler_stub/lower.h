// Lowering: a group of graph nodes becomes one plan — tiled onto the ArchSpec, allocated in
// SBUF/PSUM, with DMA for the group's inputs and outputs and semaphores from the dependencies.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "wallsim/compiler_stub/graph.h"
#include "wallsim/compiler_stub/lowering_options.h"
#include "wallsim/isa/arch_spec.h"
#include "wallsim/isa/plan.h"

namespace wallsim::compiler_stub {

// Why a group cannot be compiled: returned, never thrown, so a runtime can fall back.
struct CompileError {
  int32_t node = -1;  // the graph node at fault, or -1 for the group
  std::string op;
  std::string reason;
  std::string name = {};  // the node's name (an ONNX node's, with its module path), when it has one
  std::string message() const;
};

struct LowerStats {
  int64_t nodes = 0;  // graph nodes in the group
  int64_t instructions = 0;
  int64_t sbuf_peak_bytes = 0;  // per partition
  int64_t hbm_bytes_in = 0;
  int64_t hbm_bytes_out = 0;
  int64_t spills = 0;       // values stored to HBM scratch because SBUF was full
  int64_t spill_bytes = 0;  // bytes those stores wrote (their reloads are in hbm_bytes_in)
  // Fused attentions scheduled from their space (issue 35), the points of the last one's
  // space, and the chosen points' predicted times (ns), summed.
  int64_t attention_searched = 0;
  int64_t attention_points = 0;
  double attention_predicted_ns = 0;
  // Matmuls whose schedule was chosen from their space (issue 35), the points of the last
  // one's space, and the chosen points' predicted times (the cost model, ns), summed.
  int64_t matmul_searched = 0;
  int64_t matmul_points = 0;
  double matmul_predicted_ns = 0;
  // Matmuls whose point a ScheduleTuner chose (LoweringOptions::tuner), of them those whose
  // point differs from the model's pick, and searched matmuls whose space held no
  // LoweringOptions::forced_point (they took the model's pick).
  int64_t matmul_tuned = 0;
  int64_t matmul_tuned_changed = 0;
  int64_t matmul_forced_missed = 0;
};

struct Lowered {
  isa::Plan plan;
  LowerStats stats;
};

// The HBM tensor that carries value `id` between groups: an input node's own name, else
// "v<id>".
std::string value_name(const Graph& g, int32_t id);

// Which nodes read each value of a graph, and which values are its outputs: built once per
// compile, so each group finds the values read after it in time proportional to its own uses.
class GraphUses {
 public:
  explicit GraphUses(const Graph& g);
  bool is_output(int32_t id) const { return m_outputs.count(id) != 0; }
  const std::vector<int32_t>& consumers(int32_t id) const;

 private:
  std::unordered_map<int32_t, std::vector<int32_t>> m_consumers;
  std::unordered_set<int32_t> m_outputs;
};

// Whether the lowering has an entry for `op` (every op of ops.def should: an op without one
// fails to compile with "not supported by the lowering yet").
bool has_lowering(OpKind op);

// Lowers `group` (node ids of `g`, in graph order; types inferred) to one plan named
// `plan_name`. Values from outside the group are read from HBM tensors named value_name();
// values used after the group, or graph outputs, are written back. Inside the group,
// intermediates stay on chip. `options` are the lowering's heuristics (compiler.* keys);
// `uses`, when given, is GraphUses(g) built by the caller once for many groups.
std::variant<Lowered, CompileError> lower_group(const Graph& g, const std::vector<int32_t>& group,
                                                const isa::ArchSpec& arch,
                                                const std::string& plan_name,
                                                const LoweringOptions& options = {},
                                                const GraphUses* uses = nullptr);

}  // namespace wallsim::compiler_stub
