// ProgramDp: the data-parallel replay of a captured training program (program:...,dp=N): which
// inputs each rank splits, and the per-step gradient all-reduces in DDP's buckets.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "wallsim/runtime/session.h"
#include "wallsim/torch/program.h"

namespace wallsim::workloads::detail {

// One parameter's gradient in a program step: its last `grad` event's value.
struct DpGradient {
  int32_t id = -1;
  std::string name;
  size_t def = 0;        // the event that defines the value
  size_t first_use = 0;  // the first later event reading it (or the program's end)
  int64_t bytes = 0;
  std::vector<int64_t> shape;
};

// Gradients all-reduced together (one all-reduce), issued right after event `after`.
struct DpBucket {
  std::vector<DpGradient> grads;
  int64_t bytes = 0;
  size_t after = 0;
};

// Strong scaling of the captured global batch: rank r runs rows [r b, (r + 1) b) of every axis
// named `dim` (b = extent / dp; BoundedReplay's shards give the run shapes). Per step, each
// parameter's last `grad` is all-reduced (a sum: the captured backward already scales by the
// global batch, so the sum is the unsharded gradient; DDP's 1/N average is in that scale), in
// the order the backward defines them, in buckets of bucket_bytes or more (0: one a gradient)
// that close after their last member is defined and before any member is read.
class ProgramDp {
 public:
  // Throws base::InputError("--workload TEXT", "program.dp: ...") for a program that updates
  // its weights but marks no gradients, or names no `dim`.
  ProgramDp(const torch::Program& program, int64_t dp, double bucket_bytes, std::string dim,
            const std::string& where);

  int64_t dp() const { return m_dp; }
  const std::string& dim() const { return m_dim; }
  // The axis of `t` named exactly `dim` (the one a rank splits), or -1.
  int64_t split_axis(const torch::ProgramTensor& t) const;
  // Issues the all-reduces of program step `step`'s buckets closing after event `i`, rebinding
  // each gradient in `live` to its reduced value.
  void after_event(runtime::Session& s, size_t step, size_t i,
                   std::map<int32_t, runtime::Tensor>& live) const;
  nlohmann::ordered_json report(int64_t rows_per_rank) const;
  // Program step `step`'s all-reduce calls (one a bucket) and the graph ops they record.
  std::pair<int64_t, int64_t> calls(size_t step) const;

  // Rows [first, last) of axis `axis` of a row-major array of shape `shape`.
  static std::vector<float> rows(const std::vector<float>& v, const std::vector<int64_t>& shape,
                                 size_t axis, int64_t first, int64_t last);

 private:
  void plan_step(size_t step, const std::map<int32_t, size_t>& defs);
  void count_batch_coupled();

  const torch::Program& m_program;
  int64_t m_dp;
  double m_bucket_bytes;
  std::string m_dim;
  std::vector<std::vector<DpBucket>> m_buckets;  // per program step
  int64_t m_coupled = 0;
  std::string m_first_coupled;
};

// Each weight's value after the program (its last in-place update), in weight-event order.
std::vector<int32_t> latest_weight_ids(const torch::Program& program);

}  // namespace wallsim::workloads::detail
