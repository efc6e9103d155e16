// Strict JSON reading, writing, schema and key-table generation for described parameter structs.
#include "wallsim/base/params.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <sstream>

namespace wallsim::base {

InputError::InputError(std::string path, const std::string& problem)
    : std::runtime_error(path + ": " + problem), m_path(std::move(path)) {}

bool InputError::mentions(const std::string& key) const {
  if (key.empty()) return false;
  const std::string_view problem = std::string_view(what()).substr(m_path.size() + 2);
  auto key_char = [&](size_t i) {  // a character of a dotted key ("a.b_c"; a final '.' is not)
    const char c = problem[i];
    if (c == '.')
      return i + 1 < problem.size() && std::isalnum(static_cast<unsigned char>(problem[i + 1]));
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  };
  for (size_t at = problem.find(key); at != std::string_view::npos;
       at = problem.find(key, at + 1)) {
    const size_t end = at + key.size();
    if ((at == 0 || !key_char(at - 1)) && (end == problem.size() || !key_char(end))) return true;
  }
  return false;
}

std::string abbreviate(const Json& value) {
  std::string s = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  constexpr size_t kMax = 48;
  if (s.size() > kMax) s = s.substr(0, kMax - 3) + "...";
  return s;
}

namespace {

std::string format_real(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string join_choices(const std::vector<std::string>& choices) {
  std::string out;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i) out += ", ";
    out += choices[i];
  }
  return out;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

bool is_choice(const ParamSpec& spec, const Json& v) {
  return v.is_string() && std::find(spec.choices.begin(), spec.choices.end(),
                                    v.get<std::string>()) != spec.choices.end();
}

}  // namespace

std::string describe_expectation(const ParamSpec& spec) {
  switch (spec.kind) {
    case ParamSpec::Kind::integer:
      return "an integer in [" + std::to_string(spec.int_range.min) + ", " +
             std::to_string(spec.int_range.max) + "]";
    case ParamSpec::Kind::real:
      return "a number in [" + format_real(spec.real_range.min) + ", " +
             format_real(spec.real_range.max) + "]";
    case ParamSpec::Kind::boolean:
      return "true or false";
    case ParamSpec::Kind::text:
      return "a string";
    case ParamSpec::Kind::choice:
      return "one of " + join_choices(spec.choices);
    case ParamSpec::Kind::choice_set:
      return "a list of distinct values from " + join_choices(spec.choices);
  }
  return "";
}

// ---- JsonReader ------------------------------------------------------------------------------

JsonReader::JsonReader(const Json& object, std::string path)
    : m_object(object), m_path(std::move(path)) {}

std::string JsonReader::join(std::string_view key) const {
  return m_path.empty() ? std::string(key) : m_path + "." + std::string(key);
}

const Json* JsonReader::take(std::string_view key) {
  m_known.emplace_back(key);
  auto it = m_object.find(std::string(key));
  if (it == m_object.end()) return nullptr;
  if (!it->is_object()) throw InputError(join(key), "expected an object, got " + abbreviate(*it));
  return &*it;
}

bool JsonReader::visit(const ParamSpec& spec, Json& value) {
  m_known.emplace_back(spec.key);
  auto it = m_object.find(std::string(spec.key));
  if (it == m_object.end()) return false;
  const Json& v = *it;
  bool ok = false;
  switch (spec.kind) {
    case ParamSpec::Kind::integer:
      if (v.is_number_integer()) {
        // Unsigned values beyond int64 are out of range too.
        if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) break;
        int64_t x = v.get<int64_t>();
        ok = x >= spec.int_range.min && x <= spec.int_range.max;
      }
      break;
    case ParamSpec::Kind::real:
      if (v.is_number()) {
        double x = v.get<double>();
        ok = std::isfinite(x) && x >= spec.real_range.min && x <= spec.real_range.max;
      }
      break;
    case ParamSpec::Kind::boolean:
      ok = v.is_boolean();
      break;
    case ParamSpec::Kind::text:
      ok = v.is_string();
      break;
    case ParamSpec::Kind::choice:
      ok = is_choice(spec, v);
      break;
    case ParamSpec::Kind::choice_set:
      if (v.is_array()) {
        ok = true;
        for (size_t i = 0; i < v.size() && ok; ++i) {
          ok = is_choice(spec, v[i]);
          for (size_t k = 0; k < i && ok; ++k) ok = v[k] != v[i];
        }
      }
      break;
  }
  if (!ok) {
    throw InputError(join(spec.key),
                     "expected " + describe_expectation(spec) + ", got " + abbreviate(v));
  }
  value = v;
  return true;
}

void JsonReader::finish() const {
  for (auto it = m_object.begin(); it != m_object.end(); ++it) {
    const std::string& key = it.key();
    if (!key.empty() && key[0] == '_') continue;  // comments: sources, derivations
    if (std::find(m_known.begin(), m_known.end(), key) != m_known.end()) continue;
    throw InputError(join(key), "unknown key" + did_you_mean(key, m_known));
  }
}

std::string did_you_mean(std::string_view word, const std::vector<std::string_view>& known) {
  std::string_view best;
  size_t best_distance = 3;  // suggest only close matches
  for (const auto& k : known) {
    size_t d = edit_distance(word, k);
    if (d < best_distance) best_distance = d, best = k;
  }
  return best.empty() ? "" : " (did you mean \"" + std::string(best) + "\"?)";
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& known) {
  return did_you_mean(word, std::vector<std::string_view>(known.begin(), known.end()));
}

// ---- JsonWriter, SchemaWriter, KeyTableWriter ------------------------------------------------

bool JsonWriter::visit(const ParamSpec& spec, Json& value) {
  m_out[std::string(spec.key)] = value;
  return false;
}

SchemaWriter::SchemaWriter(Json& schema_object) : m_schema(schema_object) {
  m_schema["type"] = "object";
  m_schema["properties"] = Json::object();
  m_schema["patternProperties"] = {{"^_", Json::object()}};
  m_schema["additionalProperties"] = false;
}

bool SchemaWriter::visit(const ParamSpec& spec, Json& value) {
  Json p = Json::object();
  switch (spec.kind) {
    case ParamSpec::Kind::integer:
      p["type"] = "integer";
      p["minimum"] = spec.int_range.min;
      p["maximum"] = spec.int_range.max;
      break;
    case ParamSpec::Kind::real:
      p["type"] = "number";
      p["minimum"] = spec.real_range.min;
      p["maximum"] = spec.real_range.max;
      break;
    case ParamSpec::Kind::boolean:
      p["type"] = "boolean";
      break;
    case ParamSpec::Kind::text:
      p["type"] = "string";
      break;
    case ParamSpec::Kind::choice:
      p["enum"] = spec.choices;
      break;
    case ParamSpec::Kind::choice_set:
      p["type"] = "array";
      p["items"] = {{"enum", spec.choices}};
      p["uniqueItems"] = true;
      break;
  }
  std::string doc(spec.doc);
  if (!spec.unit.empty()) doc += " [" + std::string(spec.unit) + "]";
  p["description"] = doc;
  p["default"] = value;
  m_schema["properties"][std::string(spec.key)] = std::move(p);
  return false;
}

bool KeyTableWriter::visit(const ParamSpec& spec, Json& value) {
  std::string type;
  switch (spec.kind) {
    case ParamSpec::Kind::integer:
      type = "integer [" + std::to_string(spec.int_range.min) + ", " +
             std::to_string(spec.int_range.max) + "]";
      break;
    case ParamSpec::Kind::real:
      type = "number [" + format_real(spec.real_range.min) + ", " +
             format_real(spec.real_range.max) + "]";
      break;
    case ParamSpec::Kind::boolean:
      type = "boolean";
      break;
    case ParamSpec::Kind::text:
      type = "string";
      break;
    case ParamSpec::Kind::choice:
      type = "one of " + join_choices(spec.choices);
      break;
    case ParamSpec::Kind::choice_set:
      type = "list of " + join_choices(spec.choices);
      break;
  }
  m_rows.push_back({m_prefix + std::string(spec.key), type, std::string(spec.unit), value.dump(),
                    std::string(spec.doc)});
  return false;
}

// ---- overrides and files ---------------------------------------------------------------------

void apply_override(Json& root, std::string_view assignment) {
  auto eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    throw InputError("--set " + std::string(assignment), "expected path.to.key=value");
  }
  std::string path(assignment.substr(0, eq));
  std::string text(assignment.substr(eq + 1));
  if (!valid_utf8(assignment)) {
    throw InputError("--set " + path, "the assignment is not valid UTF-8");
  }
  Json value;
  try {
    value = parse_json(text, "--set " + path);
  } catch (const InputError& e) {
    // Not JSON: taken as a string, unless it is JSON that breaks a limit (depth, duplicates).
    if (Json::accept(text)) throw;
    value = text;
  }

  Json* node = &root;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string key =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (key.empty()) throw InputError(path, "empty key in override path");
    if (!node->is_object()) {
      throw InputError(path.substr(0, start ? start - 1 : 0),
                       "cannot set a key inside a non-object");
    }
    if (dot == std::string::npos) {
      (*node)[key] = value;
      return;
    }
    Json& next = (*node)[key];
    if (next.is_null()) next = Json::object();
    node = &next;
    start = dot + 1;
  }
}

}  // namespace wallsim::base
