// TraceSink: the run-time-chosen destination of timeline events (slices, counters, flows).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace wallsim::traces {

// Trace times are integer picoseconds; callers convert from the simulator's time type.
using TimePs = std::int64_t;

// A timeline (pid = process, tid = thread) declared on one sink. `index` is dense per sink and
// only meaningful to the sink that issued it.
struct Track {
  int pid = 0;
  int tid = 0;
  std::uint32_t index = 0;
};

// A small ordered list of (key, value) event arguments, built on the stack without allocating.
// It borrows: keys and string values must outlive the call they are passed to, so adding a
// temporary std::string does not compile. At most kMaxArgs entries (more throws
// std::length_error).
class TraceArgs {
 public:
  static constexpr std::size_t kMaxArgs = 8;
  enum class Type : std::uint8_t { kInt, kUint, kDouble, kString };
  struct Arg {
    std::string_view key;
    Type type = Type::kInt;
    union {
      std::int64_t i;
      std::uint64_t u;
      double d;
    };
    std::string_view s;
    Arg() : i(0) {}
  };

  template <typename T>
  TraceArgs& add(std::string_view key, T&& value) {
    using D = std::decay_t<T>;
    static_assert(!(std::is_same_v<D, std::string> && std::is_rvalue_reference_v<T&&>),
                  "TraceArgs borrows strings: keep the std::string alive in a variable");
    Arg& arg = next(key);
    if constexpr (std::is_integral_v<D> && std::is_signed_v<D>) {
      arg.type = Type::kInt;
      arg.i = static_cast<std::int64_t>(value);
    } else if constexpr (std::is_integral_v<D>) {
      arg.type = Type::kUint;
      arg.u = static_cast<std::uint64_t>(value);
    } else if constexpr (std::is_floating_point_v<D>) {
      arg.type = Type::kDouble;
      arg.d = static_cast<double>(value);
    } else {
      static_assert(std::is_convertible_v<T&&, std::string_view>,
                    "TraceArgs values are integers, floating point or strings");
      arg.type = Type::kString;
      arg.s = std::string_view(value);
    }
    return *this;
  }

  std::size_t size() const { return m_size; }
  bool empty() const { return m_size == 0; }
  const Arg& operator[](std::size_t i) const { return m_args[i]; }
  const Arg* begin() const { return m_args; }
  const Arg* end() const { return m_args + m_size; }

 private:
  Arg& next(std::string_view key) {
    if (m_size == kMaxArgs) throw std::length_error("TraceArgs holds at most 8 arguments");
    Arg& arg = m_args[m_size++];
    arg.key = key;
    return arg;
  }

  Arg m_args[kMaxArgs];
  std::size_t m_size = 0;
};

// Contract: times are integer picoseconds; tracks are declared on a sink before use. Slices on
// one track arrive in time order and never overlap; a sink may throw std::logic_error when they
// do (a model bug upstream), and for any event after finish(). finish() is idempotent and is the
// only way to complete the output: destroying an unfinished sink abandons it. The sink owns its
// output and copies what it keeps from the arguments. Not thread-safe. Hot paths check enabled()
// before building names and arguments.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  TraceSink(const TraceSink&) = delete;
  TraceSink& operator=(const TraceSink&) = delete;

  bool enabled() const { return m_enabled; }

  // Declaring the same (pid, tid) again returns the same track; a different name for an
  // existing process or thread throws std::invalid_argument.
  virtual Track declare_track(int pid, std::string_view process_name, int tid,
                              std::string_view thread_name) = 0;
  // A complete slice [start, start + duration); duration >= 0.
  virtual void slice(const Track& track, TimePs start, TimePs duration, std::string_view name,
                     std::string_view category, const TraceArgs& args) = 0;
  virtual void instant(const Track& track, TimePs ts, std::string_view name,
                       std::string_view category, const TraceArgs& args) = 0;
  // One sample of counter `name` in process `pid`; `series` names the line within it.
  virtual void counter(int pid, std::string_view name, TimePs ts, std::string_view series,
                       double value) = 0;
  // An arrow from the slice enclosing (track, ts) at flow_begin to the one at flow_end with the
  // same id and name.
  virtual void flow_begin(const Track& track, TimePs ts, std::uint64_t id,
                          std::string_view name) = 0;
  virtual void flow_end(const Track& track, TimePs ts, std::uint64_t id, std::string_view name) = 0;
  // A run-level key/value (config name, workload); setting a key again replaces its value.
  virtual void set_metadata(std::string_view key, std::string_view value) = 0;
  virtual void finish() = 0;

 protected:
  explicit TraceSink(bool enabled) : m_enabled(enabled) {}

 private:
  const bool m_enabled;
};

}  // namespace wallsim::traces
