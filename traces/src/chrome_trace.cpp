// ChromeTraceWriter: hand-rolled streaming JSON, one event per line, into a reused buffer.
#include "wallsim/traces/chrome_trace.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <ostream>
#include <stdexcept>

#include "wallsim/traces/write_error.h"

namespace wallsim::traces {
namespace {

constexpr std::size_t kFlushBytes = 64 * 1024;         // write out once the buffer holds this much
constexpr std::size_t kBufferBytes = 2 * kFlushBytes;  // initial buffer; grows only for huge events
constexpr std::size_t kEventOverhead = 256;            // fixed text and numbers of any event
constexpr std::size_t kMaxEscapedPerByte = 6;          // "\u00XX"
constexpr char kFormatKey[] = "trace_format";
constexpr char kFormatValue[] = "Chrome Trace Event JSON, object form; ts and dur in microseconds";

// ---- Formatting into a buffer that the caller sized with escaped_bound() and friends. ----

std::size_t escaped_bound(std::string_view s) { return s.size() * kMaxEscapedPerByte + 2; }

std::size_t args_bound(const TraceArgs& args) {
  std::size_t bound = 16;
  for (const TraceArgs::Arg& arg : args) {
    bound += escaped_bound(arg.key) + 40;
    if (arg.type == TraceArgs::Type::kString) bound += escaped_bound(arg.s);
  }
  return bound;
}

template <std::size_t N>
char* put(char* p, const char (&literal)[N]) {
  std::memcpy(p, literal, N - 1);
  return p + N - 1;
}

char* put_view(char* p, std::string_view s) {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

char* put_int(char* p, std::int64_t x) { return std::to_chars(p, p + 24, x).ptr; }
char* put_uint(char* p, std::uint64_t x) { return std::to_chars(p, p + 24, x).ptr; }

// Shortest round-trip form, independent of the locale; JSON has no NaN or infinity.
char* put_double(char* p, double x) {
  if (!std::isfinite(x)) return put(p, "null");
  return std::to_chars(p, p + 32, x).ptr;
}

// Trace times are whole nanoseconds, rounded (half up) from the simulator's picoseconds, so a
// viewer that rounds `ts` and `dur` to whole ns separately (Perfetto's JSON importer) reads the
// exact values. Rounding is monotone: back-to-back slices stay back to back.
std::int64_t round_to_ns(TimePs ps) {
  const std::int64_t q = ps / 1000;
  const std::int64_t r = ps % 1000;
  if (r >= 500) return q + 1;
  if (r < -500) return q - 1;
  return q;
}

// Whole nanoseconds as microseconds with exactly three fractional digits, e.g. 1234567 ->
// 1234.567.
char* put_ns_as_us(char* p, std::int64_t ns) {
  std::uint64_t magnitude = static_cast<std::uint64_t>(ns);
  if (ns < 0) {
    *p++ = '-';
    magnitude = 0 - magnitude;
  }
  p = put_uint(p, magnitude / 1000);
  *p++ = '.';
  std::uint64_t frac = magnitude % 1000;
  for (int i = 2; i >= 0; --i) {
    p[i] = static_cast<char>('0' + frac % 10);
    frac /= 10;
  }
  return p + 3;
}

char* put_time_us(char* p, TimePs ps) { return put_ns_as_us(p, round_to_ns(ps)); }

// Whether a + b <= c holds exactly, for the real sum of the doubles (TwoSum: a + b = s + err).
bool sum_at_most(double a, double b, double c) {
  const double s = a + b;
  const double bb = s - a;
  const double err = (a - (s - bb)) + (b - bb);
  return s < c || (s == c && err <= 0);
}

// A slice's `dur` for whole-ns start and end, chosen so that `ts + dur` does not pass `end` (where
// a next back-to-back slice starts) in any of the viewer arithmetics: rounded to whole ns
// separately (Perfetto); the real sum of the parsed doubles, hence their sum in doubles
// (chrome://tracing); and in doubles after subtracting the track's first `ts` (`first_ns`) from
// every time, as speedscope's importer does. Written exactly (three decimals) when that passes
// all three; otherwise the largest double below that does, in shortest round-trip form
// (`190.94599999999997` for 190.946 after 209.572): within a few ulps of the exact value, so
// still the same whole ns. A correctly rounded parser reads "x.yyy" as the double nearest x.yyy,
// which is exactly what `ns / 1000.0` computes (both operands are exact).
char* put_duration_us(char* p, std::int64_t start_ns, std::int64_t end_ns, std::int64_t first_ns) {
  const double ts = static_cast<double>(start_ns) / 1000.0;
  const double end = static_cast<double>(end_ns) / 1000.0;
  const double first = static_cast<double>(first_ns) / 1000.0;
  const double rebased_ts = ts - first;
  const double rebased_end = end - first;
  const auto fits = [&](double dur) {
    return sum_at_most(ts, dur, end) && rebased_ts + dur <= rebased_end;
  };
  const double exact = static_cast<double>(end_ns - start_ns) / 1000.0;
  if (fits(exact)) return put_ns_as_us(p, end_ns - start_ns);
  // Each difference is exact when its operands are within a factor of two (Sterbenz); when not,
  // the duration is as large as they are and a few steps of its own ulp reach a fitting value.
  double dur = std::min({exact, end - ts, rebased_end - rebased_ts});
  for (int i = 0; i < 64 && dur > 0 && !fits(dur); ++i) dur = std::nextafter(dur, 0.0);
  if (!fits(dur)) return put_ns_as_us(p, end_ns - start_ns);  // not reached for sane times
  return std::to_chars(p, p + 32, dur).ptr;
}

// Length of the valid UTF-8 sequence starting at s[i] (a byte >= 0x80), or 0 if invalid.
std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  std::size_t len = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < len; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return len;
}

// A quoted JSON string: '"' and '\\' escaped, control characters as \u00XX, invalid UTF-8
// bytes replaced by U+FFFD.
char* put_string(char* p, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  *p++ = '"';
  std::size_t run = 0;  // start of the pending run of bytes copied verbatim
  std::size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
      ++i;
      continue;
    }
    std::size_t utf8_len = 0;
    if (c >= 0x80) {
      utf8_len = utf8_sequence_length(s, i);
      if (utf8_len != 0) {
        i += utf8_len;
        continue;
      }
    }
    std::memcpy(p, s.data() + run, i - run);
    p += i - run;
    if (c == '"' || c == '\\') {
      *p++ = '\\';
      *p++ = static_cast<char>(c);
    } else if (c < 0x20) {
      p = put(p, "\\u00");
      *p++ = kHex[c >> 4];
      *p++ = kHex[c & 0xF];
    } else {
      p = put(p, "\xEF\xBF\xBD");  // U+FFFD REPLACEMENT CHARACTER
    }
    run = ++i;
  }
  std::memcpy(p, s.data() + run, s.size() - run);
  p += s.size() - run;
  *p++ = '"';
  return p;
}

char* put_args(char* p, const TraceArgs& args) {
  if (args.empty()) return p;
  p = put(p, ",\"args\":{");
  for (std::size_t i = 0; i < args.size(); ++i) {
    const TraceArgs::Arg& arg = args[i];
    if (i > 0) *p++ = ',';
    p = put_string(p, arg.key);
    *p++ = ':';
    switch (arg.type) {
      case TraceArgs::Type::kInt:
        p = put_int(p, arg.i);
        break;
      case TraceArgs::Type::kUint:
        p = put_uint(p, arg.u);
        break;
      case TraceArgs::Type::kDouble:
        p = put_double(p, arg.d);
        break;
      case TraceArgs::Type::kString:
        p = put_string(p, arg.s);
        break;
    }
  }
  *p++ = '}';
  return p;
}

char* put_pid_tid(char* p, int pid, int tid) {
  p = put(p, ",\"pid\":");
  p = put_int(p, pid);
  p = put(p, ",\"tid\":");
  return put_int(p, tid);
}

char* put_name_cat(char* p, std::string_view name, std::string_view category) {
  p = put(p, ",\"name\":");
  p = put_string(p, name);
  if (!category.empty()) {
    p = put(p, ",\"cat\":");
    p = put_string(p, category);
  }
  return p;
}

std::string time_string(TimePs ps) { return std::to_string(ps) + " ps"; }

}  // namespace

// ---------------------------------------------------------------------------------------------

ChromeTraceWriter::ChromeTraceWriter(std::ostream& os) : TraceSink(true), m_os(&os) { start(); }

ChromeTraceWriter::ChromeTraceWriter(const std::string& path)
    : TraceSink(true), m_os(nullptr), m_path(path) {
  const std::string tmp = m_path + ".tmp";
  m_file = std::make_unique<std::ofstream>(tmp, std::ios::binary | std::ios::trunc);
  if (!*m_file) {
    const int err = errno;
    throw WriteError(tmp, errno_reason(err));
  }
  m_os = m_file.get();
  start();
}

ChromeTraceWriter::~ChromeTraceWriter() {
  if (!m_finished) abandon();
}

void ChromeTraceWriter::start() {
  m_buf = std::make_unique<char[]>(kBufferBytes);
  m_buf_capacity = kBufferBytes;
  m_metadata.emplace_back(kFormatKey, kFormatValue);
  char* p = reserve(32);
  commit(put(p, "{\"traceEvents\":["));
}

void ChromeTraceWriter::abandon() noexcept {
  m_finished = true;
  if (m_file) {
    m_file->close();
    std::error_code ec;
    std::filesystem::remove(m_path + ".tmp", ec);
    m_file.reset();
  }
}

char* ChromeTraceWriter::begin_event(std::size_t bound) {
  char* p = reserve(bound + 2);
  if (!m_first_event) *p++ = ',';
  *p++ = '\n';
  m_first_event = false;
  return p;
}

char* ChromeTraceWriter::reserve(std::size_t bytes) {
  if (m_buf_size + bytes > m_buf_capacity) {
    flush_buffer();
    if (bytes > m_buf_capacity) {
      m_buf = std::make_unique<char[]>(bytes);
      m_buf_capacity = bytes;
    }
  }
  return m_buf.get() + m_buf_size;
}

void ChromeTraceWriter::commit(char* end) {
  m_buf_size = static_cast<std::size_t>(end - m_buf.get());
  if (m_buf_size >= kFlushBytes) flush_buffer();
}

void ChromeTraceWriter::flush_buffer() {
  if (m_buf_size == 0) return;
  if (m_write_errno >= 0) {  // an earlier write failed: events are dropped until finish()
    m_buf_size = 0;
    return;
  }
  errno = 0;
  m_os->write(m_buf.get(), static_cast<std::streamsize>(m_buf_size));
  m_buf_size = 0;
  if (!*m_os) {
    // Not thrown here: events come from simulation threads, where an exception would end the
    // simulation as an uncaught SystemC error. finish() reports it.
    m_write_errno = errno;
    if (m_file) {
      m_file->close();
      std::error_code ec;
      std::filesystem::remove(m_path + ".tmp", ec);
      m_file.reset();
    }
  }
}

void ChromeTraceWriter::check_open(const char* what) const {
  if (m_finished) {
    throw std::logic_error(std::string("ChromeTraceWriter: ") + what +
                           " after finish() or a write error");
  }
}

const ChromeTraceWriter::TrackState& ChromeTraceWriter::check_track(const Track& track,
                                                                    const char* what) {
  check_open(what);
  if (track.index >= m_tracks.size() || m_tracks[track.index].pid != track.pid ||
      m_tracks[track.index].tid != track.tid) {
    throw std::invalid_argument(std::string("ChromeTraceWriter: ") + what + " on track (pid " +
                                std::to_string(track.pid) + ", tid " + std::to_string(track.tid) +
                                ") that was not declared on this sink");
  }
  return m_tracks[track.index];
}

Track ChromeTraceWriter::declare_track(int pid, std::string_view process_name, int tid,
                                       std::string_view thread_name) {
  check_open("declare_track");
  auto process = m_process_names.find(pid);
  if (process != m_process_names.end() && process->second != process_name) {
    throw std::invalid_argument("trace process " + std::to_string(pid) + " is named '" +
                                process->second + "', cannot rename it to '" +
                                std::string(process_name) + "'");
  }
  auto existing = m_track_index.find({pid, tid});
  if (existing != m_track_index.end()) {
    const TrackState& state = m_tracks[existing->second];
    if (state.thread_name != thread_name) {
      throw std::invalid_argument("trace thread (pid " + std::to_string(pid) + ", tid " +
                                  std::to_string(tid) + ") is named '" + state.thread_name +
                                  "', cannot rename it to '" + std::string(thread_name) + "'");
    }
    return Track{pid, tid, existing->second};
  }
  if (m_tracks.size() >= std::numeric_limits<std::uint32_t>::max()) {
    throw std::length_error("ChromeTraceWriter: too many tracks");
  }

  const auto index = static_cast<std::uint32_t>(m_tracks.size());
  const std::size_t bound =
      4 * kEventOverhead + escaped_bound(process_name) + escaped_bound(thread_name);
  char* p = begin_event(bound);
  if (process == m_process_names.end()) {
    const auto sort_index = static_cast<std::int64_t>(m_process_names.size());
    p = put(p, "{\"ph\":\"M\"");
    p = put_pid_tid(p, pid, 0);
    p = put(p, ",\"name\":\"process_name\",\"args\":{\"name\":");
    p = put_string(p, process_name);
    p = put(p, "}},\n{\"ph\":\"M\"");
    p = put_pid_tid(p, pid, 0);
    p = put(p, ",\"name\":\"process_sort_index\",\"args\":{\"sort_index\":");
    p = put_int(p, sort_index);
    p = put(p, "}},\n");
  }
  p = put(p, "{\"ph\":\"M\"");
  p = put_pid_tid(p, pid, tid);
  p = put(p, ",\"name\":\"thread_name\",\"args\":{\"name\":");
  p = put_string(p, thread_name);
  p = put(p, "}},\n{\"ph\":\"M\"");
  p = put_pid_tid(p, pid, tid);
  p = put(p, ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":");
  p = put_int(p, index);
  p = put(p, "}}");

  if (process == m_process_names.end()) m_process_names.emplace(pid, std::string(process_name));
  m_track_index.emplace(std::make_pair(pid, tid), index);
  m_tracks.push_back(
      TrackState{pid, tid, std::numeric_limits<TimePs>::min(), std::string(thread_name)});
  commit(p);
  return Track{pid, tid, index};
}

void ChromeTraceWriter::slice(const Track& track, TimePs start, TimePs duration,
                              std::string_view name, std::string_view category,
                              const TraceArgs& args) {
  const TrackState& state = check_track(track, "slice");
  if (duration < 0 || start < state.last_end) {
    std::string where = "trace track '" + m_process_names.at(state.pid) + "/" + state.thread_name +
                        "' (pid " + std::to_string(state.pid) + ", tid " +
                        std::to_string(state.tid) + "): slice '" + std::string(name) + "'";
    if (duration < 0) {
      throw std::logic_error(where + " has negative duration " + time_string(duration));
    }
    throw std::logic_error(where + " starts at " + time_string(start) +
                           ", before the previous slice on this track ended at " +
                           time_string(state.last_end));
  }
  TrackState& written = m_tracks[track.index];
  written.last_end = start + duration;
  const std::int64_t start_ns = round_to_ns(start);
  if (!written.has_slice) {
    written.has_slice = true;
    written.first_ns = start_ns;
  }

  char* p = begin_event(kEventOverhead + escaped_bound(name) + escaped_bound(category) +
                        args_bound(args));
  p = put(p, "{\"ph\":\"X\"");
  p = put_pid_tid(p, track.pid, track.tid);
  p = put(p, ",\"ts\":");
  p = put_ns_as_us(p, start_ns);
  p = put(p, ",\"dur\":");
  p = put_duration_us(p, start_ns, round_to_ns(start + duration), written.first_ns);
  p = put_name_cat(p, name, category);
  p = put_args(p, args);
  *p++ = '}';
  commit(p);
}

void ChromeTraceWriter::instant(const Track& track, TimePs ts, std::string_view name,
                                std::string_view category, const TraceArgs& args) {
  check_track(track, "instant");
  char* p = begin_event(kEventOverhead + escaped_bound(name) + escaped_bound(category) +
                        args_bound(args));
  p = put(p, "{\"ph\":\"i\",\"s\":\"t\"");
  p = put_pid_tid(p, track.pid, track.tid);
  p = put(p, ",\"ts\":");
  p = put_time_us(p, ts);
  p = put_name_cat(p, name, category);
  p = put_args(p, args);
  *p++ = '}';
  commit(p);
}

void ChromeTraceWriter::counter(int pid, std::string_view name, TimePs ts, std::string_view series,
                                double value) {
  check_open("counter");
  char* p = begin_event(kEventOverhead + escaped_bound(name) + escaped_bound(series));
  p = put(p, "{\"ph\":\"C\",\"pid\":");
  p = put_int(p, pid);
  p = put(p, ",\"ts\":");
  p = put_time_us(p, ts);
  p = put(p, ",\"name\":");
  p = put_string(p, name);
  p = put(p, ",\"args\":{");
  p = put_string(p, series);
  *p++ = ':';
  p = put_double(p, value);
  p = put(p, "}}");
  commit(p);
}

void ChromeTraceWriter::flow(const Track& track, TimePs ts, std::uint64_t id, std::string_view name,
                             std::string_view head, const char* what) {
  check_track(track, what);
  char* p = begin_event(kEventOverhead + escaped_bound(name));
  p = put_view(p, head);
  p = put_uint(p, id);
  p = put_pid_tid(p, track.pid, track.tid);
  p = put(p, ",\"ts\":");
  p = put_time_us(p, ts);
  p = put_name_cat(p, name, "flow");
  *p++ = '}';
  commit(p);
}

void ChromeTraceWriter::flow_begin(const Track& track, TimePs ts, std::uint64_t id,
                                   std::string_view name) {
  flow(track, ts, id, name, "{\"ph\":\"s\",\"id\":", "flow_begin");
}

void ChromeTraceWriter::flow_end(const Track& track, TimePs ts, std::uint64_t id,
                                 std::string_view name) {
  flow(track, ts, id, name, "{\"ph\":\"f\",\"bp\":\"e\",\"id\":", "flow_end");
}

void ChromeTraceWriter::set_metadata(std::string_view key, std::string_view value) {
  check_open("set_metadata");
  for (auto& entry : m_metadata) {
    if (entry.first == key) {
      entry.second.assign(value);
      return;
    }
  }
  m_metadata.emplace_back(std::string(key), std::string(value));
}

void ChromeTraceWriter::finish() {
  if (m_finished) return;

  std::size_t bound = kEventOverhead;
  for (const auto& entry : m_metadata) {
    bound += escaped_bound(entry.first) + escaped_bound(entry.second) + 2;
  }
  char* p = reserve(bound);
  if (!m_first_event) *p++ = '\n';
  p = put(p, "],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":{");
  for (std::size_t i = 0; i < m_metadata.size(); ++i) {
    if (i > 0) *p++ = ',';
    p = put_string(p, m_metadata[i].first);
    *p++ = ':';
    p = put_string(p, m_metadata[i].second);
  }
  p = put(p, "}}\n");
  m_buf_size = static_cast<std::size_t>(p - m_buf.get());
  flush_buffer();
  if (m_write_errno < 0) {
    errno = 0;
    if (!m_os->flush()) m_write_errno = errno;
  }
  const std::string where = m_path.empty() ? "trace stream" : m_path;
  if (m_write_errno >= 0) {
    abandon();
    throw WriteError(where, errno_reason(m_write_errno));
  }
  m_finished = true;
  if (!m_file) return;
  const std::string tmp = m_path + ".tmp";
  errno = 0;
  m_file->close();
  const int close_errno = errno;
  const bool failed = m_file->fail();
  m_file.reset();
  std::error_code ec;
  if (!failed) std::filesystem::rename(tmp, m_path, ec);
  if (failed || ec) {
    const std::string reason = failed ? errno_reason(close_errno) : ec.message();
    std::filesystem::remove(tmp, ec);
    throw WriteError(m_path, reason);
  }
}

}  // namespace wallsim::traces
