// Parameter descriptions: one `describe(visitor, struct)` per config struct drives reading
// (strict, with JSON paths in errors), writing, JSON Schema and the key table, so they cannot
// drift.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "wallsim/base/enum_traits.h"

namespace wallsim::base {

using Json = nlohmann::ordered_json;

// Bad input (a config, a plan file, an override): `path()` is the JSON path (or file) at fault.
// what() is the one-line message "path: problem".
class InputError : public std::runtime_error {
 public:
  InputError(std::string path, const std::string& problem);
  const std::string& path() const { return m_path; }
  // Whether the problem names the dotted key `key` too (a cross-key check: "runtime.aot.bucket_max:
  // is smaller than runtime.aot.bucket_min" names bucket_min), whole and not as part of a longer
  // key.
  bool mentions(const std::string& key) const;

 private:
  std::string m_path;
};

struct IntRange {
  int64_t min;
  int64_t max;
};
struct RealRange {
  double min;
  double max;
};

// What a visitor is told about one field.
struct ParamSpec {
  enum class Kind { integer, real, boolean, text, choice, choice_set };
  Kind kind = Kind::integer;
  std::string_view key;
  std::string_view unit;
  std::string_view doc;
  IntRange int_range{0, 0};
  RealRange real_range{0, 0};
  std::vector<std::string> choices;
};

std::string describe_expectation(const ParamSpec& spec);

// Turns typed fields into (ParamSpec, Json value) pairs. A concrete visitor implements
//   bool visit(const ParamSpec&, Json& value)   -- return true after replacing `value`
//   template <class F> void visit_section(std::string_view key, std::string_view doc, F&& f)
// where `f(child)` describes the section into a child visitor.
template <class Derived>
class ParamVisitor {
 public:
  template <class I>
  std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>> field(std::string_view key,
                                                                            I& v, IntRange r,
                                                                            std::string_view unit,
                                                                            std::string_view doc) {
    ParamSpec s{ParamSpec::Kind::integer, key, unit, doc, r, {}, {}};
    Json j = static_cast<int64_t>(v);
    if (self().visit(s, j)) v = static_cast<I>(j.template get<int64_t>());
  }
  void field(std::string_view key, double& v, RealRange r, std::string_view unit,
             std::string_view doc) {
    ParamSpec s{ParamSpec::Kind::real, key, unit, doc, {}, r, {}};
    Json j = v;
    if (self().visit(s, j)) v = j.template get<double>();
  }
  void field(std::string_view key, bool& v, std::string_view doc) {
    ParamSpec s{ParamSpec::Kind::boolean, key, "", doc, {}, {}, {}};
    Json j = v;
    if (self().visit(s, j)) v = j.template get<bool>();
  }
  void field(std::string_view key, std::string& v, std::string_view doc) {
    ParamSpec s{ParamSpec::Kind::text, key, "", doc, {}, {}, {}};
    Json j = v;
    if (self().visit(s, j)) v = j.template get<std::string>();
  }
  template <class E>
  std::enable_if_t<std::is_enum_v<E>> field(std::string_view key, E& v, std::string_view doc) {
    ParamSpec s{ParamSpec::Kind::choice, key, "", doc, {}, {}, enum_names<E>()};
    Json j = std::string(name_of(v));
    if (self().visit(s, j)) v = static_cast<E>(index_of(s.choices, j.template get<std::string>()));
  }
  template <class E>
  void field(std::string_view key, std::vector<E>& v, std::string_view doc) {
    ParamSpec s{ParamSpec::Kind::choice_set, key, "", doc, {}, {}, enum_names<E>()};
    Json j = Json::array();
    for (E e : v) j.push_back(std::string(name_of(e)));
    if (self().visit(s, j)) {
      v.clear();
      for (const auto& name : j) {
        v.push_back(static_cast<E>(index_of(s.choices, name.template get<std::string>())));
      }
    }
  }
  template <class S>
  void section(std::string_view key, S& s, std::string_view doc) {
    self().visit_section(key, doc, [&s](auto& child) { describe(child, s); });
  }

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
  static int index_of(const std::vector<std::string>& names, const std::string& n) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == n) return static_cast<int>(i);
    }
    return 0;  // unreachable: readers validate choices before returning them
  }
};

// Reads a JSON object strictly: wrong types, out-of-range values and unknown keys (other than
// comments, keys starting with '_') throw InputError with the JSON path. Absent keys keep the
// struct's default.
class JsonReader : public ParamVisitor<JsonReader> {
 public:
  JsonReader(const Json& object, std::string path);
  bool visit(const ParamSpec& spec, Json& value);
  template <class F>
  void visit_section(std::string_view key, std::string_view, F&& f) {
    const Json* sub = take(key);
    if (!sub) return;
    JsonReader child(*sub, join(key));
    f(child);
    child.finish();
  }
  // Throws for any key that no field consumed.
  void finish() const;

 private:
  const Json* take(std::string_view key);
  std::string join(std::string_view key) const;
  const Json& m_object;
  std::string m_path;
  std::vector<std::string> m_known;
};

// Writes every field (defaults included) into a JSON object.
class JsonWriter : public ParamVisitor<JsonWriter> {
 public:
  explicit JsonWriter(Json& out) : m_out(out) {}
  bool visit(const ParamSpec& spec, Json& value);
  template <class F>
  void visit_section(std::string_view key, std::string_view, F&& f) {
    Json& sub = m_out[std::string(key)] = Json::object();
    JsonWriter child(sub);
    f(child);
  }

 private:
  Json& m_out;
};

// Produces a JSON Schema (draft 2020-12) object describing the fields and their defaults.
class SchemaWriter : public ParamVisitor<SchemaWriter> {
 public:
  explicit SchemaWriter(Json& schema_object);
  bool visit(const ParamSpec& spec, Json& value);
  template <class F>
  void visit_section(std::string_view key, std::string_view doc, F&& f) {
    Json& sub = m_schema["properties"][std::string(key)] = Json::object();
    SchemaWriter child(sub);
    sub["description"] = std::string(doc);
    f(child);
  }

 private:
  Json& m_schema;
};

// One row per field, with its dotted path: the raw material of configs/README.md.
struct KeyRow {
  std::string path;
  std::string type;
  std::string unit;
  std::string default_value;
  std::string doc;
};
class KeyTableWriter : public ParamVisitor<KeyTableWriter> {
 public:
  KeyTableWriter(std::vector<KeyRow>& rows, std::string prefix)
      : m_rows(rows), m_prefix(std::move(prefix)) {}
  bool visit(const ParamSpec& spec, Json& value);
  template <class F>
  void visit_section(std::string_view key, std::string_view, F&& f) {
    KeyTableWriter child(m_rows, m_prefix + std::string(key) + ".");
    f(child);
  }

 private:
  std::vector<KeyRow>& m_rows;
  std::string m_prefix;
};

// Convenience wrappers over the visitors for a described struct T.
template <class T>
void read_params(const Json& j, T& out, const std::string& path) {
  if (!j.is_object()) throw InputError(path.empty() ? "(root)" : path, "expected an object");
  JsonReader r(j, path);
  describe(r, out);
  r.finish();
}
template <class T>
Json write_params(T value) {
  Json j = Json::object();
  JsonWriter w(j);
  describe(w, value);
  return j;
}
template <class T>
Json schema_of(T defaults) {
  Json j = Json::object();
  SchemaWriter w(j);
  describe(w, defaults);
  return j;
}
template <class T>
std::vector<KeyRow> key_rows(T defaults) {
  std::vector<KeyRow> rows;
  KeyTableWriter w(rows, "");
  describe(w, defaults);
  return rows;
}

// Applies one `a.b.c=value` override to a JSON document: the value is parsed as JSON, else
// taken as a string. Intermediate objects are created; a non-object on the way is an error.
void apply_override(Json& root, std::string_view assignment);

// Limits on every JSON document wallsim reads (issue 20): nesting depth and file size.
inline constexpr int kMaxJsonDepth = 256;
inline constexpr int64_t kMaxInputFileBytes = int64_t{1} << 30;

// Parses JSON text strictly: syntax errors, nesting deeper than kMaxJsonDepth, numbers that do
// not fit a double and duplicate keys are InputError(source, "<json path>: <problem>").
Json parse_json(std::string_view text, const std::string& source);

// Reads a whole input file: it must be a regular file (not a directory, FIFO or device) of at
// most max_bytes, checked before opening and again while reading.
std::string read_input_file(const std::string& path, int64_t max_bytes = kMaxInputFileBytes);

// Reads and parses a JSON file with read_input_file and parse_json; every error is an
// InputError naming the file.
Json read_json_file(const std::string& path, int64_t max_bytes = kMaxInputFileBytes);

// Whether s is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool valid_utf8(std::string_view s);

// " (did you mean \"K\"?)" for the closest known word within two edits, else "".
std::string did_you_mean(std::string_view word, const std::vector<std::string_view>& known);
std::string did_you_mean(std::string_view word, const std::vector<std::string>& known);

// A short rendering of a JSON value for error messages.
std::string abbreviate(const Json& value);

}  // namespace wallsim::base
