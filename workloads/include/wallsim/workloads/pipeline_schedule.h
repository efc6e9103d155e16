// The 1F1B pipeline schedule (Megatron-LM's, PipeDream-Flush): one stage's forwards, backwards
// and the sends and receives between them, in the order the stage issues them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wallsim::workloads {

// recv_forward: the activations of micro-batch `micro` from stage - 1; send_forward: to stage + 1;
// recv_backward: their gradient from stage + 1; send_backward: to stage - 1.
enum class PipeOp { forward, backward, recv_forward, send_forward, recv_backward, send_backward };

struct PipeStep {
  PipeOp op;
  int64_t micro;
};

// Forwards stage `stage` of `stages` runs before its first backward: min(stages - stage - 1, M).
int64_t warmup_forwards(int64_t stages, int64_t stage, int64_t micro_batches);

// Stage `stage`'s program: `training` = 1F1B (warm-up forwards, then one forward and one backward
// in turn, then the cool-down backwards); otherwise the forwards alone (recv, forward, send). The
// first stage receives nothing and the last sends nothing forward. Sends and receives with one
// neighbour come in the order the neighbour issues their partners: in the steady state a stage
// sends its activations before it receives the gradient from stage + 1, and receives the next
// activations before it sends the gradient to stage - 1, so blocking (rendezvous) sends never
// deadlock.
std::vector<PipeStep> pipeline_program(int64_t stages, int64_t stage, int64_t micro_batches,
                                       bool training);

// The idle share of a 1F1B step with equal stage times: (stages - 1) / (M + stages - 1).
double bubble_fraction(int64_t stages, int64_t micro_batches);

// "F0 >f0 <b0 B0 ..." (tests, debugging): F and B a forward and a backward, > and < a send and a
// recv of activations (f) or gradients (b), each with its micro-batch.
std::string describe(const std::vector<PipeStep>& program);

}  // namespace wallsim::workloads
