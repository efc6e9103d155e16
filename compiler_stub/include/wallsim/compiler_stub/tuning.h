// Measured schedule tuning (issue 35): the compiler's side. Where compiler.tune is on, a matmul
// whose schedule is searched hands its model-ranked candidates to a ScheduleTuner, which its
// caller supplies (the runtime's SimulatedTuner: a tuning cache, and the simulator as the
// device). compiler_stub itself never simulates: it only enumerates, ranks and applies points.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wallsim/compiler_stub/graph.h"

namespace wallsim::compiler_stub {

struct TuningCandidate {
  std::string point;  // the schedule point, as its describe() text
  double predicted_ns = 0;
};

// One op to tune. `graph` is the op alone (its operands graph inputs in HBM, a transposed
// operand as a transpose node): compiling it with LoweringOptions::forced_point = a candidate's
// point gives that candidate as a one-op plan.
struct TuningQuery {
  std::string family;  // "matmul"
  // The op's shapes, dtypes and operand layouts and the arch fingerprint: the one-op graph's
  // group signature text (signature.h), the key plans are cached by.
  std::string signature;
  Graph graph;
  // The cost model's best `compiler.tune.candidates` points, fastest predicted first; [0] is
  // the point the compiler takes untuned (the model's pick).
  std::vector<TuningCandidate> candidates;
};

class ScheduleTuner {
 public:
  virtual ~ScheduleTuner() = default;
  // The point to take: a candidate's, or a point a cache recorded for the same key; empty for
  // the model's pick. A returned point the op's space does not hold is ignored (model's pick).
  virtual std::string choose(const TuningQuery& query) = 0;
};

}  // namespace wallsim::compiler_stub
