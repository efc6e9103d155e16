// stale_buffers: an op that writes its input buffer in place (a KV append, a paged-cache
// write) leaves no live tensor holding that buffer's old version; the stream is cut after it so
// that every later reader sees the materialised new buffer.
#include "wallsim/runtime/materialize.h"

namespace wallsim::runtime {
namespace {

class StaleBuffers final : public MaterializationPolicy {
 public:
  void apply(const OpStream& s, CutPlan& plan) const override {
    for (size_t i = 0; i < s.size(); ++i) {
      if (compiler_stub::info(s.node(i).op).result == compiler_stub::OpResult::in_place)
        plan.cut_after(i, Heuristic::stale_buffers);
    }
  }
};

}  // namespace

const MaterializationPolicy& stale_buffers_policy() {
  static const StaleBuffers kPolicy;
  return kPolicy;
}

}  // namespace wallsim::runtime
