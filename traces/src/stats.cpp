// Stats registry, name checks, and the JSON and text writers.
#include "wallsim/traces/stats.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <ostream>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

namespace wallsim::traces {

using nlohmann::ordered_json;

Stat::Stat(StatKind kind, std::string name, std::string unit, std::string description)
    : m_kind(kind),
      m_name(std::move(name)),
      m_unit(std::move(unit)),
      m_description(std::move(description)) {}

Counter::Counter(std::string name, std::string unit, std::string description)
    : Stat(kKind, std::move(name), std::move(unit), std::move(description)) {}

Value::Value(std::string name, std::string unit, std::string description)
    : Stat(kKind, std::move(name), std::move(unit), std::move(description)) {}

Text::Text(std::string name, std::string unit, std::string description)
    : Stat(kKind, std::move(name), std::move(unit), std::move(description)) {}

// ---------------------------------------------------------------------------------------------
// Registry

namespace {

bool is_name_char(char c) {
  return c > ' ' && c <= '~' && c != '.' && c != '"' && c != '\\' && c != '#';
}

}  // namespace

void StatsRegistry::check_name(const std::string& name) const {
  if (name.empty()) throw std::invalid_argument("stat name is empty");
  std::size_t segment_start = 0;
  for (std::size_t i = 0; i <= name.size(); ++i) {
    if (i == name.size() || name[i] == '.') {
      if (i == segment_start) {
        throw std::invalid_argument("stat '" + name + "' has an empty name segment");
      }
      if (i < name.size()) {
        auto leaf = m_by_name.find(std::string_view(name).substr(0, i));
        if (leaf != m_by_name.end()) {
          throw std::invalid_argument("stat '" + name + "' is nested under existing stat '" +
                                      leaf->first + "'");
        }
      }
      segment_start = i + 1;
    } else if (!is_name_char(name[i])) {
      throw std::invalid_argument("stat '" + name +
                                  "' contains a character not allowed in stat names");
    }
  }
  if (m_by_name.count(name) != 0) {
    throw std::invalid_argument("stat '" + name + "' is already registered");
  }
  if (m_prefixes.count(name) != 0) {
    throw std::invalid_argument("stat '" + name + "' is already a prefix of other stats");
  }
}

void StatsRegistry::index(const Stat& stat) {
  const std::string& name = stat.name();
  for (std::size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1)) {
    m_prefixes.insert(name.substr(0, dot));
  }
  m_by_name.emplace(name, &stat);
  m_order.push_back(&stat);
}

Counter& StatsRegistry::add_counter(std::string name, std::string unit, std::string description) {
  check_name(name);
  Counter& stat = m_counters.emplace_back(std::move(name), std::move(unit), std::move(description));
  index(stat);
  return stat;
}

Value& StatsRegistry::add_value(std::string name, std::string unit, std::string description) {
  check_name(name);
  Value& stat = m_values.emplace_back(std::move(name), std::move(unit), std::move(description));
  index(stat);
  return stat;
}

Text& StatsRegistry::add_text(std::string name, std::string unit, std::string description) {
  check_name(name);
  Text& stat = m_texts.emplace_back(std::move(name), std::move(unit), std::move(description));
  index(stat);
  return stat;
}

const Stat* StatsRegistry::find(std::string_view name) const {
  auto it = m_by_name.find(name);
  return it == m_by_name.end() ? nullptr : it->second;
}

// ---------------------------------------------------------------------------------------------
// Scope

StatsScope::StatsScope(StatsRegistry& registry, std::string prefix)
    : m_registry(&registry), m_prefix(std::move(prefix)) {}

StatsScope StatsScope::scope(std::string_view child) const {
  return StatsScope(*m_registry, full_name(child));
}

std::string StatsScope::full_name(std::string_view name) const {
  if (m_prefix.empty()) return std::string(name);
  std::string full;
  full.reserve(m_prefix.size() + 1 + name.size());
  full.append(m_prefix).append(1, '.').append(name);
  return full;
}

Counter& StatsScope::add_counter(std::string_view name, std::string unit,
                                 std::string description) const {
  return m_registry->add_counter(full_name(name), std::move(unit), std::move(description));
}

Value& StatsScope::add_value(std::string_view name, std::string unit,
                             std::string description) const {
  return m_registry->add_value(full_name(name), std::move(unit), std::move(description));
}

Text& StatsScope::add_text(std::string_view name, std::string unit, std::string description) const {
  return m_registry->add_text(full_name(name), std::move(unit), std::move(description));
}

// ---------------------------------------------------------------------------------------------
// JSON writer

namespace {

ordered_json number_or_null(double x) {
  return std::isfinite(x) ? ordered_json(x) : ordered_json(nullptr);
}

ordered_json stat_to_json(const Stat& stat) {
  switch (stat.kind()) {
    case StatKind::kCounter:
      return static_cast<const Counter&>(stat).value();
    case StatKind::kValue: {
      const auto& value = static_cast<const Value&>(stat);
      switch (value.type()) {
        case Value::Type::kInt:
          return value.as_int();
        case Value::Type::kDouble:
          return number_or_null(value.as_double());
        case Value::Type::kUnset:
          break;
      }
      return nullptr;
    }
    case StatKind::kText:
      return static_cast<const Text&>(stat).value();
  }
  return nullptr;
}

void merge_into(ordered_json& target, const ordered_json& extra, const std::string& path) {
  for (auto it = extra.begin(); it != extra.end(); ++it) {
    const std::string key_path = path.empty() ? it.key() : path + "." + it.key();
    auto found = target.find(it.key());
    if (found == target.end()) {
      target[it.key()] = it.value();
    } else if (found->is_object() && it.value().is_object()) {
      merge_into(*found, it.value(), key_path);
    } else {
      throw std::invalid_argument("extra stats key '" + key_path + "' collides with a stat");
    }
  }
}

void dump(const ordered_json& j, std::ostream& os) {
  // Invalid UTF-8 in a text stat is replaced rather than failing the end of a run.
  os << j.dump(2, ' ', false, ordered_json::error_handler_t::replace) << '\n';
}

}  // namespace

ordered_json stats_to_json(const StatsRegistry& registry) {
  ordered_json root = ordered_json::object();
  for (const Stat* stat : registry.stats()) {
    const std::string& name = stat->name();
    ordered_json* node = &root;
    std::size_t start = 0;
    for (std::size_t dot = name.find('.'); dot != std::string::npos;
         start = dot + 1, dot = name.find('.', start)) {
      node = &(*node)[name.substr(start, dot - start)];
    }
    (*node)[name.substr(start)] = stat_to_json(*stat);
  }
  return root;
}

void write_stats_json(const StatsRegistry& registry, std::ostream& os) {
  dump(stats_to_json(registry), os);
}

void write_stats_json(const StatsRegistry& registry, std::ostream& os, const ordered_json& extra) {
  if (!extra.is_object()) {
    throw std::invalid_argument("extra stats must be a JSON object, got " +
                                std::string(extra.type_name()));
  }
  ordered_json root = stats_to_json(registry);
  merge_into(root, extra, "");
  dump(root, os);
}

// ---------------------------------------------------------------------------------------------
// Text writer

namespace {

constexpr std::size_t kMaxValueColumn = 24;

// printf("%.6g") without the locale: std::to_chars in general format with precision 6.
void append_double(std::string& out, double x) {
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::general, 6);
  out.append(buf, result.ptr);
}

void append_uint(std::string& out, std::uint64_t x) {
  char buf[24];
  auto result = std::to_chars(buf, buf + sizeof(buf), x);
  out.append(buf, result.ptr);
}

void append_int(std::string& out, std::int64_t x) {
  char buf[24];
  auto result = std::to_chars(buf, buf + sizeof(buf), x);
  out.append(buf, result.ptr);
}

std::string text_value(const Stat& stat) {
  std::string out;
  switch (stat.kind()) {
    case StatKind::kCounter:
      append_uint(out, static_cast<const Counter&>(stat).value());
      break;
    case StatKind::kValue: {
      const auto& value = static_cast<const Value&>(stat);
      switch (value.type()) {
        case Value::Type::kInt:
          append_int(out, value.as_int());
          break;
        case Value::Type::kDouble:
          append_double(out, value.as_double());
          break;
        case Value::Type::kUnset:
          out += '-';
          break;
      }
      break;
    }
    case StatKind::kText:
      out = ordered_json(static_cast<const Text&>(stat).value())
                .dump(-1, ' ', false, ordered_json::error_handler_t::replace);
      break;
  }
  return out;
}

std::string text_comment(const Stat& stat) {
  if (stat.unit().empty() && stat.description().empty()) return {};
  std::string out = "# ";
  out += stat.unit();
  if (!stat.unit().empty() && !stat.description().empty()) out += " \u2014 ";
  out += stat.description();
  return out;
}

}  // namespace

void write_stats_text(const StatsRegistry& registry, std::ostream& os) {
  std::size_t name_width = 0;
  std::size_t value_width = 0;
  std::vector<std::string> values;
  values.reserve(registry.size());
  for (const Stat* stat : registry.stats()) {
    values.push_back(text_value(*stat));
    name_width = std::max(name_width, stat->name().size());
    value_width = std::max(value_width, std::min(values.back().size(), kMaxValueColumn));
  }
  std::string line;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const Stat& stat = *registry.stats()[i];
    line.assign(stat.name());
    line.append(name_width - stat.name().size() + 2, ' ');
    line.append(values[i]);
    const std::string comment = text_comment(stat);
    if (!comment.empty()) {
      line.append(values[i].size() < value_width ? value_width - values[i].size() + 2 : 2, ' ');
      line.append(comment);
    }
    line += '\n';
    os << line;
  }
}

namespace {

std::string section_value(const nlohmann::ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    char buf[32];
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e15) {
      std::snprintf(buf, sizeof buf, "%.0f", d);  // a whole number held as a double
    } else {
      std::snprintf(buf, sizeof buf, "%.6g", d);
    }
    return buf;
  }
  return v.dump();
}

bool is_table(const nlohmann::ordered_json& v) {
  return v.is_array() && !v.empty() && v.front().is_object();
}

// A row's scalar cells by dotted column name, nested objects flattened; arrays left out.
void flatten_row(const nlohmann::ordered_json& row, const std::string& prefix,
                 std::vector<std::pair<std::string, std::string>>& out) {
  for (const auto& [k, v] : row.items()) {
    if (v.is_object()) {
      flatten_row(v, prefix + k + ".", out);
    } else if (!v.is_array()) {
      out.emplace_back(prefix + k, section_value(v));
    }
  }
}

void write_table(const std::string& name, const nlohmann::ordered_json& rows, std::ostream& os) {
  std::vector<std::string> columns;
  std::vector<std::map<std::string, std::string>> cells;
  for (const auto& row : rows) {
    std::vector<std::pair<std::string, std::string>> flat;
    flatten_row(row, "", flat);
    std::map<std::string, std::string> r;
    for (auto& [k, v] : flat) {
      if (std::find(columns.begin(), columns.end(), k) == columns.end()) columns.push_back(k);
      r[k] = std::move(v);
    }
    cells.push_back(std::move(r));
  }
  std::vector<std::size_t> width;
  for (const std::string& c : columns) {
    std::size_t w = c.size();
    for (const auto& r : cells) {
      auto it = r.find(c);
      if (it != r.end()) w = std::max(w, it->second.size());
    }
    width.push_back(w);
  }
  os << "\n# " << name << ": " << rows.size() << " rows\n";
  const auto line = [&](const std::function<std::string(std::size_t)>& cell) {
    std::string text;
    for (std::size_t i = 0; i < columns.size(); ++i) {
      const std::string v = cell(i);
      if (i > 0) text.append(2, ' ');
      text.append(width[i] - std::min(width[i], v.size()), ' ');  // right-aligned
      text += v;
    }
    os << text << "\n";
  };
  line([&](std::size_t i) { return columns[i]; });
  for (const auto& r : cells) {
    line([&](std::size_t i) {
      auto it = r.find(columns[i]);
      return it == r.end() ? std::string() : it->second;
    });
  }
}

void collect_section(const std::string& name, const nlohmann::ordered_json& v,
                     std::vector<std::pair<std::string, std::string>>& lines,
                     std::vector<std::pair<std::string, const nlohmann::ordered_json*>>& tables) {
  if (is_table(v)) {
    tables.emplace_back(name, &v);
  } else if (v.is_object()) {
    for (const auto& [k, sub] : v.items()) collect_section(name + "." + k, sub, lines, tables);
  } else {
    lines.emplace_back(name, v.is_array() ? v.dump() : section_value(v));
  }
}

}  // namespace

void write_sections_text(const nlohmann::ordered_json& sections, std::ostream& os,
                         const std::set<std::string>& skip) {
  std::vector<std::pair<std::string, std::string>> lines;
  std::vector<std::pair<std::string, const nlohmann::ordered_json*>> tables;
  for (const auto& [k, v] : sections.items()) {
    if (!skip.count(k)) collect_section(k, v, lines, tables);
  }
  std::size_t width = 0;
  for (const auto& line : lines) width = std::max(width, line.first.size());
  for (const auto& [name, value] : lines) {
    os << name << std::string(width - name.size() + 2, ' ') << value << "\n";
  }
  for (const auto& [name, rows] : tables) write_table(name, *rows, os);
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * double(values.size())));
  return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
}

void StatsRegistry::order_by_name() {
  std::stable_sort(m_order.begin(), m_order.end(),
                   [](const Stat* a, const Stat* b) { return a->name() < b->name(); });
}

void StatsRegistry::group_scopes(std::size_t segments) {
  auto scope_of = [segments](const std::string& name) {
    std::size_t end = 0, pos = 0;
    for (std::size_t k = 0; k < segments; ++k, pos = end + 1) {
      end = name.find('.', pos);
      if (end == std::string::npos) return std::string_view(name);
    }
    return std::string_view(name).substr(0, end);
  };
  std::map<std::string_view, std::size_t> first;  // scope -> position of its first stat
  std::vector<std::size_t> key(m_order.size());
  for (std::size_t k = 0; k < m_order.size(); ++k) {
    key[k] = first.emplace(scope_of(m_order[k]->name()), k).first->second;
  }
  std::vector<std::size_t> at(m_order.size());
  for (std::size_t k = 0; k < at.size(); ++k) at[k] = k;
  std::stable_sort(at.begin(), at.end(),
                   [&](std::size_t a, std::size_t b) { return key[a] < key[b]; });
  std::vector<const Stat*> order;
  order.reserve(at.size());
  for (std::size_t k : at) order.push_back(m_order[k]);
  m_order = std::move(order);
}

void StatsRegistry::copy_scope(const std::string& from, const std::string& to) {
  if (from.empty() || to.empty() || to == from || to.rfind(from + ".", 0) == 0 ||
      from.rfind(to + ".", 0) == 0) {
    throw std::invalid_argument("stats scope '" + from + "' cannot be copied onto '" + to + "'");
  }
  const std::string prefix = from + ".";
  std::vector<const Stat*> sources;
  for (const Stat* stat : m_order) {
    if (stat->name().compare(0, prefix.size(), prefix) == 0) sources.push_back(stat);
  }
  for (const Stat* src : sources) {  // checked first: nothing changes when one fails
    const std::string name = to + src->name().substr(from.size());
    const Stat* twin = find(name);
    if (twin != nullptr && twin->kind() != src->kind()) {
      throw std::invalid_argument("stat '" + name + "' is not of the kind of '" + src->name() +
                                  "'");
    }
    if (twin == nullptr) check_name(name);
  }
  for (const Stat* src : sources) {
    const std::string name = to + src->name().substr(from.size());
    const Stat* twin = find(name);
    // The registry owns every stat (non-const in its deques): setting the twin is safe.
    switch (src->kind()) {
      case StatKind::kCounter: {
        Counter& t = twin ? const_cast<Counter&>(static_cast<const Counter&>(*twin))
                          : add_counter(name, src->unit(), src->description());
        t.set(static_cast<const Counter*>(src)->value());
        break;
      }
      case StatKind::kValue: {
        Value& t = twin ? const_cast<Value&>(static_cast<const Value&>(*twin))
                        : add_value(name, src->unit(), src->description());
        const Value& v = static_cast<const Value&>(*src);
        if (v.type() == Value::Type::kInt) {
          t.set(v.as_int());
        } else if (v.type() == Value::Type::kDouble) {
          t.set(v.as_double());
        } else {
          t.unset();
        }
        break;
      }
      case StatKind::kText: {
        Text& t = twin ? const_cast<Text&>(static_cast<const Text&>(*twin))
                       : add_text(name, src->unit(), src->description());
        t.set(static_cast<const Text*>(src)->value());
        break;
      }
    }
  }
  // The twins in `from`'s order, in the places they hold among the stats (a twin registered by
  // its own core at another moment than its source, e.g. when the core is finalized, moves).
  std::map<std::string_view, std::size_t> rank;
  std::vector<std::string> names;
  names.reserve(sources.size());
  for (const Stat* src : sources) names.push_back(to + src->name().substr(from.size()));
  for (std::size_t i = 0; i < names.size(); ++i) rank.emplace(names[i], i);
  std::vector<std::size_t> places;
  std::vector<const Stat*> twins;
  for (std::size_t k = 0; k < m_order.size(); ++k) {
    if (rank.count(m_order[k]->name())) {
      places.push_back(k);
      twins.push_back(m_order[k]);
    }
  }
  std::stable_sort(twins.begin(), twins.end(), [&](const Stat* a, const Stat* b) {
    return rank.at(a->name()) < rank.at(b->name());
  });
  for (std::size_t i = 0; i < places.size(); ++i) m_order[places[i]] = twins[i];
}

}  // namespace wallsim::traces
