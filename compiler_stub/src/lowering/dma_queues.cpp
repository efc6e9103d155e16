// DmaQueuePlanner and dma_queue_layout: the plan's DMA queues and the queue of each transfer.
#include "wallsim/compiler_stub/dma_queues.h"

#include <algorithm>
#include <tuple>

namespace wallsim::compiler_stub {

std::vector<QueueSpec> dma_queue_layout(int64_t engines, int64_t queues_max,
                                        int64_t load_queues_per_engine,
                                        int64_t store_queues_per_engine) {
  // Several queues share an engine, so one queue's descriptor issue overlaps another's
  // transfer; each transfer goes to the least loaded engine (DmaQueuePlanner::next_load).
  const int64_t stores =
      std::max<int64_t>(1, std::min(store_queues_per_engine * engines, queues_max - 1));
  const int64_t loads =
      std::max<int64_t>(1, std::min(load_queues_per_engine * engines, queues_max - stores));
  // Two classes only where each reaches every engine: with fewer load queues than twice the
  // engines (tiny: 4 of 8 queues load, over 4 engines), plan-input loads would reach half the
  // engines while the other half carries only stores and reloads.
  const int64_t prefetch = loads >= 2 * engines ? (loads + 1) / 2 : loads;
  std::vector<QueueSpec> specs;
  for (int64_t q = 0; q < loads; ++q) {
    specs.push_back({"ld" + std::to_string(q), q % engines,
                     q < prefetch ? QueueClass::input_load : QueueClass::dependent_load});
  }
  for (int64_t q = 0; q < stores; ++q) {
    specs.push_back({"st" + std::to_string(q), (loads + q) % engines, QueueClass::store});
  }
  return specs;
}

DmaQueuePlanner::DmaQueuePlanner(int64_t engines)
    : m_engine_bytes(static_cast<size_t>(std::max<int64_t>(engines, 0)), 0) {}

void DmaQueuePlanner::add_queue(int stream, int64_t engine, QueueClass cls) {
  const auto size = std::max(m_queue_engine.size(), static_cast<size_t>(stream) + 1);
  m_queue_engine.resize(size, -1);
  m_queue_bytes.resize(size, 0);
  m_queue_serves.resize(size, kNoLoad);
  m_queue_engine[static_cast<size_t>(stream)] = engine;
  switch (cls) {
    case QueueClass::input_load:
      m_load_queues.push_back(stream);
      break;
    case QueueClass::dependent_load:
      m_dependent_load_queues.push_back(stream);
      break;
    case QueueClass::store:
      m_store_queues.push_back(stream);
      break;
    case QueueClass::collective:
      break;
  }
}

void DmaQueuePlanner::take_store(int stream) {
  if (m_store_queues.size() < 2) return;
  m_store_queues.erase(std::remove(m_store_queues.begin(), m_store_queues.end(), stream),
                       m_store_queues.end());
}

int DmaQueuePlanner::least_loaded(const std::vector<int>& queues) const {
  int best = queues.front();
  for (int q : queues) {
    const auto qi = static_cast<size_t>(q), bi = static_cast<size_t>(best);
    const int64_t e = m_engine_bytes[static_cast<size_t>(m_queue_engine[qi])];
    const int64_t be = m_engine_bytes[static_cast<size_t>(m_queue_engine[bi])];
    if (e < be || (e == be && m_queue_bytes[qi] < m_queue_bytes[bi])) best = q;
  }
  return best;
}

// A dependent load waits for a result and then is on the op's critical path: its pieces go
// to the engines this op has given the fewest dependent bytes so far, then to the least loaded,
// so one op's reload is spread over every engine instead of following the plan-wide balance
// (which sent a decode step's K/V pieces to the same six engines). The weight loads, placed
// by least_loaded, even the engines out again.
int DmaQueuePlanner::spread(const std::vector<int>& queues, int32_t node) {
  if (m_spread_node != node) {
    m_spread_node = node;
    m_spread_bytes.assign(m_engine_bytes.size(), 0);
  }
  int best = queues.front();
  auto key = [&](int q) {
    const auto e = static_cast<size_t>(m_queue_engine[static_cast<size_t>(q)]);
    return std::make_tuple(m_spread_bytes[e], m_engine_bytes[e],
                           m_queue_bytes[static_cast<size_t>(q)]);
  };
  for (int q : queues) {
    if (key(q) < key(best)) best = q;
  }
  return best;
}

int DmaQueuePlanner::place_load(int proposed, bool input, int32_t node, int position) {
  int stream = proposed;
  if (!input) {
    stream = spread(dependent_queues(), node);
  } else if (m_prefetched && !m_prefetching) {
    std::vector<int> clear;
    for (int q : m_load_queues) {
      if (m_queue_serves[static_cast<size_t>(q)] <= position) clear.push_back(q);
    }
    stream = clear.empty() ? spread(dependent_queues(), node) : least_loaded(clear);
  }
  m_queue_serves[static_cast<size_t>(stream)] = m_prefetching ? m_prefetch_position : position;
  return stream;
}

void DmaQueuePlanner::record(int stream, int64_t bytes, int32_t node) {
  const auto engine = static_cast<size_t>(m_queue_engine[static_cast<size_t>(stream)]);
  m_engine_bytes[engine] += bytes;
  if (m_spread_node == node && !m_spread_bytes.empty()) m_spread_bytes[engine] += bytes;
  m_queue_bytes[static_cast<size_t>(stream)] += bytes;
}

}  // namespace wallsim::compiler_stub
