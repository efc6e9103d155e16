// ChromeTraceWriter: streams Chrome Trace Event JSON (object form) for Perfetto / chrome://tracing.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wallsim/traces/trace_sink.h"

namespace wallsim::traces {

// Writes {"traceEvents":[...],"displayTimeUnit":"ns","metadata":{...}}, one event per line, as
// events arrive (memory does not grow with the trace). ts/dur are microseconds printed exactly
// from picoseconds with six fractional digits. Slices on one track that overlap throw
// std::logic_error naming the track. The path constructor writes `path + ".tmp"` and renames it
// to `path` in finish(), so an unfinished or failed run leaves no trace file. A failed write
// (a full disk) drops the file and later events, and finish() throws WriteError naming the path:
// events come from simulation threads, which must not throw. The ostream constructor borrows the
// stream, which must outlive the writer; finish() flushes it. Strings are escaped for JSON and
// invalid UTF-8 is replaced by U+FFFD.
class ChromeTraceWriter final : public TraceSink {
 public:
  explicit ChromeTraceWriter(std::ostream& os);
  explicit ChromeTraceWriter(const std::string& path);
  ~ChromeTraceWriter() override;

  Track declare_track(int pid, std::string_view process_name, int tid,
                      std::string_view thread_name) override;
  void slice(const Track& track, TimePs start, TimePs duration, std::string_view name,
             std::string_view category, const TraceArgs& args) override;
  void instant(const Track& track, TimePs ts, std::string_view name, std::string_view category,
               const TraceArgs& args) override;
  void counter(int pid, std::string_view name, TimePs ts, std::string_view series,
               double value) override;
  void flow_begin(const Track& track, TimePs ts, std::uint64_t id, std::string_view name) override;
  void flow_end(const Track& track, TimePs ts, std::uint64_t id, std::string_view name) override;
  void set_metadata(std::string_view key, std::string_view value) override;
  void finish() override;

 private:
  // A flow event: `head` opens the JSON object up to the id.
  void flow(const Track& track, TimePs ts, std::uint64_t id, std::string_view name,
            std::string_view head, const char* what);
  struct TrackState {
    int pid;
    int tid;
    TimePs last_end;
    std::string thread_name;
    bool has_slice = false;
    std::int64_t first_ns = 0;  // the first slice's start (whole ns), once there is one
  };

  void start();
  const TrackState& check_track(const Track& track, const char* what);
  void check_open(const char* what) const;
  char* begin_event(std::size_t bound);  // reserves bound bytes and writes the separator
  char* reserve(std::size_t bytes);
  void commit(char* end);
  void flush_buffer();
  void abandon() noexcept;

  std::unique_ptr<std::ofstream> m_file;
  std::ostream* m_os;
  std::string m_path;  // empty for the ostream form
  bool m_finished = false;
  int m_write_errno = -1;  // errno of the first failed write; -1 while none has failed
  bool m_first_event = true;

  std::unique_ptr<char[]> m_buf;
  std::size_t m_buf_size = 0;
  std::size_t m_buf_capacity = 0;

  std::vector<TrackState> m_tracks;
  std::map<std::pair<int, int>, std::uint32_t> m_track_index;
  std::map<int, std::string> m_process_names;
  std::vector<std::pair<std::string, std::string>> m_metadata;
};

}  // namespace wallsim::traces
