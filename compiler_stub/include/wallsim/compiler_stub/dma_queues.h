// The DMA-queue planner: which queues a plan has and which one each transfer takes, a pure
// function of the bytes placed so far, the transfer's role and the position of the op it serves.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace wallsim::compiler_stub {

// Loads of plan inputs (weights: they wait for nothing but SBUF room), loads of values the plan
// writes (they wait for compute), stores, and the plan's collectives (a queue of their own, in no
// rotation).
enum class QueueClass { input_load, dependent_load, store, collective };

struct QueueSpec {
  std::string name;  // "ld<k>" or "st<k>"
  int64_t engine = 0;
  QueueClass cls = QueueClass::input_load;
};

// The queues of a chip with `engines` DMA engines and at most `queues_max` queues: loads and
// stores on separate queues, `*_per_engine` of each per engine (so a chip with more or fewer
// engines keeps the same queues on each), covering every engine; the two load classes are
// separate only where each reaches every engine. In the order the plan declares them.
std::vector<QueueSpec> dma_queue_layout(int64_t engines, int64_t queues_max,
                                        int64_t load_queues_per_engine,
                                        int64_t store_queues_per_engine);

// Places transfers on the queues it is given (by plan stream key). It never emits: the emitter
// asks it for a queue, then reports each transfer's bytes (record). Queue keys index vectors,
// so any stream key below the largest queue's may be a compute stream (not a queue).
class DmaQueuePlanner {
 public:
  explicit DmaQueuePlanner(int64_t engines);
  void add_queue(int stream, int64_t engine, QueueClass cls);

  bool is_queue(int stream) const {
    return stream >= 0 && static_cast<size_t>(stream) < m_queue_engine.size() &&
           m_queue_engine[static_cast<size_t>(stream)] >= 0;
  }
  // The load (store) queue for the next transfer: one on the DMA engine with the fewest bytes
  // so far, loads and stores together, so every engine carries an even share; the queue with
  // the fewest bytes among an engine's. A load's queue is settled again by place_load.
  int next_load() const { return least_loaded(m_load_queues); }
  int next_store() const { return least_loaded(m_store_queues); }
  // A queue beside the input prefetch queues (the dependent loads'): a plan input loaded for a
  // later phase shares the engines with the prefetch behind it instead of queueing in front.
  int next_side_load() const { return least_loaded(dependent_queues()); }
  int64_t load_queue_count() const { return static_cast<int64_t>(m_load_queues.size()); }
  // Every queue added, of every class.
  int64_t queue_count() const {
    return std::count_if(m_queue_engine.begin(), m_queue_engine.end(),
                         [](int64_t e) { return e >= 0; });
  }
  // Takes store queue `stream` out of the store rotation (a plan with no queue to spare
  // dedicates one to its collectives); the last store queue stays.
  void take_store(int stream);
  int64_t store_queue_count() const { return static_cast<int64_t>(m_store_queues.size()); }

  // Weight prefetch (lowering::LoweringContext::prefetch_weights): loads placed between
  // begin_prefetch and end_prefetch are for the op at `position`, later in the group.
  void begin_prefetch(int position) {
    m_prefetching = true;
    m_prefetch_position = position;
  }
  void end_prefetch() {
    m_prefetching = false;
    m_prefetched = true;
  }
  bool prefetching() const { return m_prefetching; }

  // The queue a load into SBUF takes, `proposed` by its caller, for op `node` at `position`:
  // - a load of a value the plan writes (not `input`) waits for a result and is on the op's
  //   critical path: the dependent queues, on the engines this op has given the fewest
  //   dependent bytes so far, then the least loaded (spread);
  // - once weights were prefetched, a prefetch queue may hold loads for later ops: an input
  //   load the current op needs takes a load queue whose last load is for this op or an
  //   earlier one, else a dependent queue, never a place behind them;
  // - otherwise `proposed`.
  int place_load(int proposed, bool input, int32_t node, int position);
  // Counts `bytes` moved by a transfer on queue `stream` for op `node`.
  void record(int stream, int64_t bytes, int32_t node);

  int64_t engine_bytes(int64_t engine) const { return m_engine_bytes[static_cast<size_t>(engine)]; }
  int64_t queue_bytes(int stream) const { return m_queue_bytes[static_cast<size_t>(stream)]; }
  int64_t engine_of(int stream) const { return m_queue_engine[static_cast<size_t>(stream)]; }

 private:
  // One load class: the dependent loads share the input loads' queues.
  const std::vector<int>& dependent_queues() const {
    return m_dependent_load_queues.empty() ? m_load_queues : m_dependent_load_queues;
  }
  int least_loaded(const std::vector<int>& queues) const;
  int spread(const std::vector<int>& queues, int32_t node);

  static constexpr int kNoLoad = std::numeric_limits<int>::min();  // m_queue_serves: none yet
  std::vector<int> m_load_queues;
  std::vector<int> m_store_queues;
  std::vector<int> m_dependent_load_queues;  // empty: one load class
  std::vector<int64_t> m_queue_engine;       // stream key -> its engine (-1: not a queue)
  std::vector<int64_t> m_queue_bytes;        // bytes placed on each queue
  std::vector<int> m_queue_serves;           // queue -> position of the op its last load is for
  std::vector<int64_t> m_engine_bytes;       // bytes placed on each DMA engine
  int32_t m_spread_node = -1;                // the op whose dependent loads m_spread_bytes counts
  std::vector<int64_t> m_spread_bytes;       // per DMA engine
  bool m_prefetching = false;                // loads placed now are prefetches
  bool m_prefetched = false;                 // the plan has prefetched weights
  int m_prefetch_position = 0;               // while prefetching: the op loaded for
};

}  // namespace wallsim::compiler_stub
