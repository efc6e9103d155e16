// WindowTraceSink: passes on only what overlaps a time window, so long runs stay openable.
#pragma once

#include "wallsim/traces/trace_sink.h"

namespace wallsim::traces {

// Forwards to `inner` (owned elsewhere) the slices that overlap [from, to], and counters,
// instants and flow ends inside it. Track declarations and metadata always pass.
class WindowTraceSink final : public TraceSink {
 public:
  WindowTraceSink(TraceSink& inner, TimePs from, TimePs to)
      : TraceSink(inner.enabled()), m_inner(inner), m_from(from), m_to(to) {}
  Track declare_track(int pid, std::string_view process, int tid,
                      std::string_view thread) override {
    return m_inner.declare_track(pid, process, tid, thread);
  }
  void slice(const Track& t, TimePs start, TimePs dur, std::string_view name, std::string_view cat,
             const TraceArgs& args) override {
    if (start <= m_to && start + dur >= m_from) m_inner.slice(t, start, dur, name, cat, args);
  }
  void instant(const Track& t, TimePs ts, std::string_view name, std::string_view cat,
               const TraceArgs& args) override {
    if (inside(ts)) m_inner.instant(t, ts, name, cat, args);
  }
  void counter(int pid, std::string_view name, TimePs ts, std::string_view series,
               double value) override {
    if (inside(ts)) m_inner.counter(pid, name, ts, series, value);
  }
  void flow_begin(const Track& t, TimePs ts, uint64_t id, std::string_view name) override {
    if (inside(ts)) m_inner.flow_begin(t, ts, id, name);
  }
  void flow_end(const Track& t, TimePs ts, uint64_t id, std::string_view name) override {
    if (inside(ts)) m_inner.flow_end(t, ts, id, name);
  }
  void set_metadata(std::string_view key, std::string_view value) override {
    m_inner.set_metadata(key, value);
  }
  void finish() override { m_inner.finish(); }

 private:
  bool inside(TimePs ts) const { return ts >= m_from && ts <= m_to; }
  TraceSink& m_inner;
  TimePs m_from;
  TimePs m_to;
};

}  // namespace wallsim::traces
