// The serve workload's batch schedulers: continuous (iteration-level) and static batching.
#include <algorithm>

#include "serve_batching.h"

namespace wallsim::workloads::detail {
namespace {

// Continuous: admit what fits (first come, first served), prefill each newcomer, then one
// decode iteration over the running batch. A sequence that cannot grow its cache preempts the
// latest admitted one, which frees its blocks and later recomputes its tokens by a prefill.
class ContinuousScheduler final : public BatchScheduler {
 public:
  std::string_view name() const override { return "continuous"; }
  bool pads_to_buckets() const override { return false; }
  bool prefills_in_batches() const override { return false; }
  bool scatters_blocks() const override { return true; }

  size_t round(runtime::Session& s, ServeLoop& loop, std::deque<Seq*>& waiting) override {
    runtime::KvBlockManager& kv = loop.kv();
    const int64_t block = loop.block_rows();
    size_t finished = 0;
    while (!waiting.empty() && static_cast<int64_t>(m_running.size()) < loop.max_batch()) {
      Seq* q = waiting.front();
      const int64_t need = q->req->prompt + q->generated;  // a preempted one recomputes
      // Admit only with a block to spare for every running sequence's next token.
      const int64_t free = kv.blocks() - kv.used_blocks();
      if (free - (need + block - 1) / block < static_cast<int64_t>(m_running.size()) ||
          !kv.reserve(q->req->id, need)) {
        break;
      }
      waiting.pop_front();
      q->kv = need;
      loop.note_kv(kv.tokens());
      loop.run_iteration(s, {q}, true);
      if (q->done()) {
        loop.finish(q);
        ++finished;
      } else {
        m_running.push_back(q);
      }
    }
    if (m_running.empty()) return finished;
    for (size_t i = 0; i < m_running.size(); ++i) {
      while (!kv.reserve(m_running[i]->req->id, m_running[i]->kv + 1)) {
        const bool itself = i + 1 == m_running.size();  // the latest admitted cannot grow
        Seq* victim = m_running.back();
        m_running.pop_back();
        kv.release(victim->req->id);
        victim->kv = 0;
        ++victim->preemptions;
        waiting.push_front(victim);
        if (itself) break;
      }
    }
    if (m_running.empty()) return finished;
    loop.note_kv(kv.tokens());
    loop.run_iteration(s, m_running, false);
    std::vector<Seq*> still;
    for (Seq* q : m_running) {
      if (q->done()) {
        loop.finish(q);
        ++finished;
      } else {
        still.push_back(q);
      }
    }
    m_running = still;
    return finished;
  }
  bool running() const override { return !m_running.empty(); }

 private:
  std::vector<Seq*> m_running;
};

// Static: a batch of what has arrived (up to max_batch, and what the pool can hold at each
// sequence's padded capacity), prefilled together, then decoded until its longest output is
// done; finished sequences stay in the batch as padding.
class StaticScheduler final : public BatchScheduler {
 public:
  std::string_view name() const override { return "static"; }
  bool pads_to_buckets() const override { return true; }
  bool prefills_in_batches() const override { return true; }
  bool scatters_blocks() const override { return false; }

  size_t round(runtime::Session& s, ServeLoop& loop, std::deque<Seq*>& waiting) override {
    std::vector<Seq*> batch;
    while (!waiting.empty() && static_cast<int64_t>(batch.size()) < loop.max_batch() &&
           loop.kv().reserve(waiting.front()->req->id, loop.capacity_rows())) {
      batch.push_back(waiting.front());
      waiting.pop_front();
    }
    auto stored = [&] {
      int64_t n = 0;
      for (const Seq* q : batch) n += q->kv;
      return n;
    };
    for (Seq* q : batch) q->kv = q->req->prompt;
    loop.note_kv(stored());
    loop.run_iteration(s, batch, true);
    std::vector<Seq*> live;
    for (Seq* q : batch) {
      if (!q->done()) live.push_back(q);
    }
    while (!live.empty()) {
      loop.note_kv(stored() + static_cast<int64_t>(live.size()));
      loop.run_iteration(s, batch, false);
      live.erase(std::remove_if(live.begin(), live.end(), [](Seq* q) { return q->done(); }),
                 live.end());
    }
    for (Seq* q : batch) loop.finish(q);
    return batch.size();
  }
};

}  // namespace

std::unique_ptr<BatchScheduler> make_batch_scheduler(std::string_view name) {
  if (name == "static") return std::make_unique<StaticScheduler>();
  return std::make_unique<ContinuousScheduler>();
}

}  // namespace wallsim::workloads::detail
