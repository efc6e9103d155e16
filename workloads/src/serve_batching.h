// Serving: a request in flight, and the batch-scheduler interface the serve workload drives
// (continuous and static in batch_schedulers.cpp; the report in serve_report.cpp).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "wallsim/runtime/kv_blocks.h"
#include "wallsim/runtime/session.h"
#include "wallsim/workloads/requests.h"

namespace wallsim::workloads::detail {

// A request in flight.
struct Seq {
  const Request* req = nullptr;
  int64_t generated = 0;  // output tokens so far
  int64_t kv = 0;         // tokens whose keys and values are in the cache
  int64_t preemptions = 0;
  std::vector<int64_t> token_ns;  // when each output token reached the host
  std::vector<float> values;      // functional runs: each token's value
  bool done() const { return generated >= req->output; }
};

inline int64_t pow2_at_least(int64_t v, int64_t from) {
  int64_t b = from;
  while (b < v) b *= 2;
  return b;
}

// What a scheduler drives: the KV block pool and one iteration (a step of the session) over a
// batch. Implemented by the serve workload.
class ServeLoop {
 public:
  virtual ~ServeLoop() = default;
  virtual runtime::KvBlockManager& kv() = 0;
  virtual int64_t max_batch() const = 0;
  virtual int64_t block_rows() const = 0;
  // Rows of cache one sequence may need.
  virtual int64_t capacity_rows() const = 0;
  // Before an iteration: `tokens` rows of the blocks in use hold keys and values.
  virtual void note_kv(int64_t tokens) = 0;
  // The plan over `seqs` (finished ones ride along as padding), a token for each unfinished one.
  virtual void run_iteration(runtime::Session& s, const std::vector<Seq*>& seqs, bool prefill) = 0;
  // Releases a finished sequence's blocks.
  virtual void finish(Seq* q) = 0;
};

// A batch scheduler decides which sequences each iteration runs. It owns its running batch;
// the waiting queue (arrived, not running) belongs to the caller.
class BatchScheduler {
 public:
  virtual ~BatchScheduler() = default;
  virtual std::string_view name() const = 0;
  // One round over what has arrived: runs one or more iterations through `loop`; returns how
  // many sequences finished.
  virtual size_t round(runtime::Session& s, ServeLoop& loop, std::deque<Seq*>& waiting) = 0;
  // Sequences are running between rounds (the serve loop may not idle).
  virtual bool running() const { return false; }
  // Batches and lengths are padded to power-of-two buckets (every batch size is a plan shape,
  // a sequence reserves its padded capacity); otherwise they run as they are.
  virtual bool pads_to_buckets() const = 0;
  // Prefills run batched (else one sequence each).
  virtual bool prefills_in_batches() const = 0;
  // The pool hands out blocks in a seeded scattered order, as a long-running server's free list
  // does (else in order).
  virtual bool scatters_blocks() const = 0;
};

// What the serve report counts besides the sequences themselves.
struct ServeTally {
  int64_t start_ns = 0, end_ns = 0;
  int64_t prefills = 0, decodes = 0, decode_rows = 0, decode_padded_rows = 0;
  int64_t block_rows = 0, pool_blocks = 0, peak_blocks = 0, kv_samples = 0;
  double kv_util_sum = 0;
  // The MACs of the live sequences at their real shapes (as add_real_macs), and of the padding
  // by source: rows of no live sequence, prefill tokens past a prompt, keys past a sequence.
  double real_macs = 0, batch_pad_macs = 0, prompt_pad_macs = 0, keys_pad_macs = 0;
};
// The "serving" section of the run report: throughput, latency percentiles, iterations, the KV
// pool and every request.
nlohmann::ordered_json serving_report(std::string_view scheduler, const std::vector<Seq>& seqs,
                                      const ServeTally& tally);

// "continuous" or "static".
std::unique_ptr<BatchScheduler> make_batch_scheduler(std::string_view name);
inline const std::vector<std::string>& batch_scheduler_names() {
  static const std::vector<std::string> kNames = {"static", "continuous"};
  return kNames;
}

}  // namespace wallsim::workloads::detail
