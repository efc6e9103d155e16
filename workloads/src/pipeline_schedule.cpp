// The 1F1B pipeline schedule: each stage's program (pipeline_schedule.h).
#include "wallsim/workloads/pipeline_schedule.h"

#include <algorithm>

namespace wallsim::workloads {

int64_t warmup_forwards(int64_t stages, int64_t stage, int64_t micro_batches) {
  return std::min(stages - stage - 1, micro_batches);
}

std::vector<PipeStep> pipeline_program(int64_t stages, int64_t stage, int64_t micro_batches,
                                       bool training) {
  const bool first = stage == 0, last = stage == stages - 1;
  std::vector<PipeStep> p;
  const auto add = [&p](PipeOp op, int64_t m) { p.push_back({op, m}); };
  const auto forward = [&](int64_t m, bool receive) {
    if (!first && receive) add(PipeOp::recv_forward, m);
    add(PipeOp::forward, m);
  };
  if (!training) {
    for (int64_t m = 0; m < micro_batches; ++m) {
      forward(m, true);
      if (!last) add(PipeOp::send_forward, m);
    }
    return p;
  }
  const int64_t warmup = warmup_forwards(stages, stage, micro_batches);
  const int64_t steady = micro_batches - warmup;
  for (int64_t m = 0; m < warmup; ++m) {
    forward(m, true);
    if (!last) add(PipeOp::send_forward, m);
  }
  if (steady > 0 && !first) add(PipeOp::recv_forward, warmup);
  for (int64_t i = 0; i < steady; ++i) {
    forward(warmup + i, false);  // received before the loop or by the last iteration
    if (!last) {
      add(PipeOp::send_forward, warmup + i);
      add(PipeOp::recv_backward, i);
    }
    add(PipeOp::backward, i);
    if (i + 1 < steady && !first) add(PipeOp::recv_forward, warmup + i + 1);
    if (!first) add(PipeOp::send_backward, i);
  }
  for (int64_t m = steady; m < micro_batches; ++m) {
    if (!last) add(PipeOp::recv_backward, m);
    add(PipeOp::backward, m);
    if (!first) add(PipeOp::send_backward, m);
  }
  return p;
}

double bubble_fraction(int64_t stages, int64_t micro_batches) {
  return double(stages - 1) / double(micro_batches + stages - 1);
}

std::string describe(const std::vector<PipeStep>& program) {
  std::string s;
  for (const PipeStep& st : program) {
    if (!s.empty()) s += ' ';
    switch (st.op) {
      case PipeOp::forward:
        s += 'F';
        break;
      case PipeOp::backward:
        s += 'B';
        break;
      case PipeOp::recv_forward:
        s += "<f";
        break;
      case PipeOp::send_forward:
        s += ">f";
        break;
      case PipeOp::recv_backward:
        s += "<b";
        break;
      case PipeOp::send_backward:
        s += ">b";
        break;
    }
    s += std::to_string(st.micro);
  }
  return s;
}

}  // namespace wallsim::workloads
