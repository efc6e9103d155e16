// Statistics: typed handles registered under hierarchical dotted names, written at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <iosfwd>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace wallsim::traces {

enum class StatKind { kCounter, kValue, kText };

// Name, unit and description shared by every stat. Stats are neither copyable nor movable:
// a component holds a reference to the one the registry owns, so `auto x = reg.add_counter(...)`
// does not compile (write `auto& x = ...`).
class Stat {
 public:
  Stat(const Stat&) = delete;
  Stat& operator=(const Stat&) = delete;

  StatKind kind() const { return m_kind; }
  const std::string& name() const { return m_name; }
  const std::string& unit() const { return m_unit; }
  const std::string& description() const { return m_description; }

 protected:
  Stat(StatKind kind, std::string name, std::string unit, std::string description);
  ~Stat() = default;

 private:
  StatKind m_kind;
  std::string m_name;
  std::string m_unit;
  std::string m_description;
};

// An event count. The hot path is an inline add on an integer member.
class Counter : public Stat {
 public:
  static constexpr StatKind kKind = StatKind::kCounter;
  Counter(std::string name, std::string unit, std::string description);

  Counter& operator+=(std::uint64_t n) {
    m_value += n;
    return *this;
  }
  Counter& operator++() {
    ++m_value;
    return *this;
  }
  std::uint64_t value() const { return m_value; }
  // Replaces the count (StatsRegistry::copy_scope).
  void set(std::uint64_t v) { m_value = v; }

 private:
  std::uint64_t m_value = 0;
};

// A number computed once at the end (a utilisation, a ratio). Unset values write as null / "-".
class Value : public Stat {
 public:
  static constexpr StatKind kKind = StatKind::kValue;
  enum class Type { kUnset, kInt, kDouble };
  Value(std::string name, std::string unit, std::string description);

  void set(double v) {
    m_type = Type::kDouble;
    m_double = v;
  }
  void set(std::int64_t v) {
    m_type = Type::kInt;
    m_int = v;
  }
  // Any other integer type; unsigned values above INT64_MAX are kept as double.
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool> &&
                                             !std::is_same_v<T, std::int64_t>,
                                         int> = 0>
  void set(T v) {
    if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(std::int64_t)) {
      if (v > static_cast<T>(std::numeric_limits<std::int64_t>::max())) {
        set(static_cast<double>(v));
        return;
      }
    }
    set(static_cast<std::int64_t>(v));
  }

  Type type() const { return m_type; }
  void unset() { m_type = Type::kUnset; }
  std::int64_t as_int() const { return m_int; }  // meaningful when type() == kInt
  double as_double() const { return m_type == Type::kInt ? static_cast<double>(m_int) : m_double; }

 private:
  Type m_type = Type::kUnset;
  std::int64_t m_int = 0;
  double m_double = 0.0;
};

// A string, e.g. device.clock = "tensor 2400 MHz".
class Text : public Stat {
 public:
  static constexpr StatKind kKind = StatKind::kText;
  Text(std::string name, std::string unit, std::string description);

  void set(std::string v) { m_value = std::move(v); }
  const std::string& value() const { return m_value; }

 private:
  std::string m_value;
};

// Owns every stat of a run. Contract: a name is dot-separated non-empty segments of printable
// ASCII other than space, '"', '\\' and '#'; a name is registered once and is never both a leaf
// and a prefix of another name. Violations throw std::invalid_argument naming the stat.
// Returned references stay valid for the registry's lifetime (also across a move). Not
// thread-safe; registration is not meant for the hot path, updates through handles are.
class StatsRegistry {
 public:
  StatsRegistry() = default;
  StatsRegistry(const StatsRegistry&) = delete;
  StatsRegistry& operator=(const StatsRegistry&) = delete;
  StatsRegistry(StatsRegistry&&) = default;
  StatsRegistry& operator=(StatsRegistry&&) = default;

  Counter& add_counter(std::string name, std::string unit, std::string description);
  Value& add_value(std::string name, std::string unit, std::string description);
  Text& add_text(std::string name, std::string unit, std::string description);

  // nullptr when absent (or, for find_as, of another kind).
  const Stat* find(std::string_view name) const;
  template <typename T>
  const T* find_as(std::string_view name) const {
    const Stat* stat = find(name);
    return stat != nullptr && stat->kind() == T::kKind ? static_cast<const T*>(stat) : nullptr;
  }

  // Every stat in registration order (or by name after order_by_name()).
  const std::vector<const Stat*>& stats() const { return m_order; }
  // Puts the stats in name order: for runs whose registration order follows SystemC's run
  // order (several cores), so that the written stats do not.
  void order_by_name();
  std::size_t size() const { return m_order.size(); }
  // Puts each scope's stats together, where its first stat stands, each scope keeping its own
  // order (a stable partition). A stat's scope is its first `segments` name segments (itself
  // when it has no more): with 2, chip0.core1.* is one scope. For runs of several cores whose
  // lazily registered stats interleave in SystemC's run order: the written order then follows
  // each core's own, and the scopes' first stats, registered at construction.
  void group_scopes(std::size_t segments);
  // Gives every stat under `from.` its twin under `to.` (same unit, description and value):
  // an existing twin is set (of another kind: std::invalid_argument), a missing one registered;
  // then the twins stand in `from`'s order, in the places in the registration order they hold. For
  // a core simulated once for several (SPMD folding). Copying a scope onto itself, or onto one
  // nested in it, throws std::invalid_argument.
  void copy_scope(const std::string& from, const std::string& to);

 private:
  void check_name(const std::string& name) const;
  void index(const Stat& stat);

  std::deque<Counter> m_counters;
  std::deque<Value> m_values;
  std::deque<Text> m_texts;
  std::vector<const Stat*> m_order;
  std::map<std::string, const Stat*, std::less<>> m_by_name;
  std::set<std::string, std::less<>> m_prefixes;
};

// Registers stats under a fixed prefix, so a component only knows its own part of the tree:
// StatsScope(reg, "device.engines.tensor").add_counter("busy_cycles", ...). Holds a reference
// to the registry, which must outlive it.
class StatsScope {
 public:
  StatsScope(StatsRegistry& registry, std::string prefix);

  StatsScope scope(std::string_view child) const;
  const std::string& prefix() const { return m_prefix; }
  StatsRegistry& registry() const { return *m_registry; }

  Counter& add_counter(std::string_view name, std::string unit, std::string description) const;
  Value& add_value(std::string_view name, std::string unit, std::string description) const;
  Text& add_text(std::string_view name, std::string unit, std::string description) const;

 private:
  std::string full_name(std::string_view name) const;

  StatsRegistry* m_registry;
  std::string m_prefix;
};

// The stats as nested objects following the dotted names, in registration order. Counters are
// integers; accumulators {"sum","count","min","max","mean"}; histograms
// {"edges","counts","underflow","overflow","count","sum"}; values numbers; text strings.
// Non-finite doubles and unset values are null.
nlohmann::ordered_json stats_to_json(const StatsRegistry& registry);

// Writes stats_to_json with 2-space indentation and a trailing newline. `extra` must be an
// object; it is merged in recursively (objects merge, any other collision throws
// std::invalid_argument naming the key). Output is byte-identical for identical content.
void write_stats_json(const StatsRegistry& registry, std::ostream& os);
void write_stats_json(const StatsRegistry& registry, std::ostream& os,
                      const nlohmann::ordered_json& extra);

// For people: one line per stat, `name  value  # unit — description`, names and values
// left-aligned in columns. Doubles are printed like printf("%.6g") in the C locale.
void write_stats_text(const StatsRegistry& registry, std::ostream& os);

// The sections a run adds to stats.json (`extra`), for stats.txt: scalars and objects as
// `section.key value` lines, arrays of objects (steps, ops, requests) as aligned tables with a
// `# name: N rows` heading, nested objects in a row flattened to `a.b` columns. Keys in `skip`
// are left out (e.g. `nodes`).
void write_sections_text(const nlohmann::ordered_json& sections, std::ostream& os,
                         const std::set<std::string>& skip = {});

// The p-th percentile (0-100) of `values` by nearest rank (a value that occurred); 0 for none.
double percentile(std::vector<double> values, double p);

}  // namespace wallsim::traces
