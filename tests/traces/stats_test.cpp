// Tests for the stats registry and its JSON and text writers.
#include "wallsim/traces/stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace wallsim::traces {
namespace {

using nlohmann::ordered_json;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string json_of(const StatsRegistry& reg) {
  std::ostringstream os;
  write_stats_json(reg, os);
  return os.str();
}

std::string text_of(const StatsRegistry& reg) {
  std::ostringstream os;
  write_stats_text(reg, os);
  return os.str();
}

// Throws std::invalid_argument whose message mentions `needle`.
template <typename F>
void expect_invalid(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected std::invalid_argument mentioning " << needle;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Counter, IncrementsAndAdds) {
  StatsRegistry reg;
  Counter& c = reg.add_counter("a.hits", "events", "hits");
  EXPECT_EQ(c.value(), 0u);
  ++c;
  ++c;
  c += 40;
  EXPECT_EQ(c.value(), 42u);
  EXPECT_EQ(c.kind(), StatKind::kCounter);
  EXPECT_EQ(c.name(), "a.hits");
  EXPECT_EQ(c.unit(), "events");
  EXPECT_EQ(c.description(), "hits");
}

TEST(Value, HoldsIntOrDouble) {
  StatsRegistry reg;
  Value& v = reg.add_value("v", "", "");
  EXPECT_EQ(v.type(), Value::Type::kUnset);
  v.set(7);
  EXPECT_EQ(v.type(), Value::Type::kInt);
  EXPECT_EQ(v.as_int(), 7);
  v.set(0.25);
  EXPECT_EQ(v.type(), Value::Type::kDouble);
  EXPECT_EQ(v.as_double(), 0.25);
  v.set(std::uint64_t{5});
  EXPECT_EQ(v.type(), Value::Type::kInt);
  v.set(std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(v.type(), Value::Type::kDouble);
}

TEST(Text, HoldsString) {
  StatsRegistry reg;
  Text& t = reg.add_text("device.clock", "", "clock summary");
  t.set("tensor 2400 MHz");
  EXPECT_EQ(t.value(), "tensor 2400 MHz");
}

TEST(StatsRegistry, HandlesStayValidAcrossManyRegistrations) {
  StatsRegistry reg;
  Counter& first = reg.add_counter("c.0", "", "");
  for (int i = 1; i < 5000; ++i) reg.add_counter("c." + std::to_string(i), "", "");
  ++first;
  EXPECT_EQ(reg.find_as<Counter>("c.0")->value(), 1u);
  EXPECT_EQ(&first, reg.find("c.0"));

  StatsRegistry moved = std::move(reg);
  ++first;
  EXPECT_EQ(moved.find_as<Counter>("c.0")->value(), 2u);
}

TEST(StatsRegistry, FindByNameAndKind) {
  StatsRegistry reg;
  reg.add_counter("a.b", "", "");
  reg.add_value("a.c", "", "");
  EXPECT_NE(reg.find("a.b"), nullptr);
  EXPECT_EQ(reg.find("a"), nullptr);
  EXPECT_EQ(reg.find("a.b.c"), nullptr);
  EXPECT_NE(reg.find_as<Counter>("a.b"), nullptr);
  EXPECT_EQ(reg.find_as<Value>("a.b"), nullptr);
  EXPECT_NE(reg.find_as<Value>("a.c"), nullptr);
  ASSERT_EQ(reg.stats().size(), 2u);
  EXPECT_EQ(reg.stats()[0]->name(), "a.b");
  EXPECT_EQ(reg.stats()[1]->name(), "a.c");
}

TEST(StatsRegistry, RejectsDuplicateNames) {
  StatsRegistry reg;
  reg.add_counter("device.engines.tensor.busy_cycles", "cycles", "");
  expect_invalid([&] { reg.add_counter("device.engines.tensor.busy_cycles", "", ""); },
                 "device.engines.tensor.busy_cycles");
  expect_invalid([&] { reg.add_value("device.engines.tensor.busy_cycles", "", ""); },
                 "already registered");
}

TEST(StatsRegistry, RejectsEmptyNamesAndSegments) {
  StatsRegistry reg;
  expect_invalid([&] { reg.add_counter("", "", ""); }, "empty");
  for (const char* name : {".a", "a.", "a..b", "."}) {
    expect_invalid([&] { reg.add_counter(name, "", ""); }, name);
  }
  for (const char* name : {"a b", "a#b", "a\"b", "a\\b", "a\nb", "caf\xc3\xa9"}) {
    expect_invalid([&] { reg.add_counter(name, "", ""); }, "not allowed");
  }
  EXPECT_EQ(reg.size(), 0u);
  EXPECT_NO_THROW(reg.add_counter("dma_queue[3]:bytes-in", "", ""));
}

TEST(StatsRegistry, RejectsLeafThatIsAlsoPrefix) {
  StatsRegistry reg;
  reg.add_counter("a.b", "", "");
  expect_invalid([&] { reg.add_counter("a.b.c", "", ""); }, "a.b.c");
  expect_invalid([&] { reg.add_counter("a.b.c.d", "", ""); }, "'a.b'");

  reg.add_counter("x.y.z", "", "");
  expect_invalid([&] { reg.add_counter("x.y", "", ""); }, "x.y");
  expect_invalid([&] { reg.add_counter("x", "", ""); }, "prefix");
  // Siblings and names that merely share characters are fine.
  EXPECT_NO_THROW(reg.add_counter("a.bc", "", ""));
  EXPECT_NO_THROW(reg.add_counter("x.y.w", "", ""));
  EXPECT_NO_THROW(reg.add_counter("x.yy", "", ""));
}

TEST(StatsScope, PrefixesNames) {
  StatsRegistry reg;
  StatsScope device(reg, "device");
  StatsScope tensor = device.scope("engines").scope("tensor");
  EXPECT_EQ(tensor.prefix(), "device.engines.tensor");
  Counter& busy = tensor.add_counter("busy_cycles", "cycles", "busy");
  EXPECT_EQ(busy.name(), "device.engines.tensor.busy_cycles");
  EXPECT_EQ(reg.find("device.engines.tensor.busy_cycles"), &busy);
  StatsScope root(reg, "");
  EXPECT_EQ(root.add_value("top", "", "").name(), "top");
  expect_invalid([&] { tensor.add_counter("", "", ""); }, "device.engines.tensor.");
}

StatsRegistry make_sample_registry() {
  StatsRegistry reg;
  reg.add_text("device.clock", "", "clock summary").set("tensor 2400 MHz");
  reg.add_counter("device.engines.tensor.busy_cycles", "cycles", "cycles the engine was busy") +=
      1200;
  reg.add_value("device.dma.latency", "ns", "DMA latency").set(5.0);
  reg.add_counter("host.dispatches", "launches", "kernel launches") += 3;
  reg.add_counter("device.engines.vector.busy_cycles", "cycles", "") += 7;
  reg.add_value("device.engines.tensor.utilisation", "", "busy / total").set(0.1);
  reg.add_value("device.engines.tensor.steps", "steps", "").set(4);
  reg.add_value("device.unset", "", "never set");
  reg.add_value("device.empty", "ns", "never set either");
  return reg;
}

TEST(WriteStatsJson, NestsDottedNamesInRegistrationOrder) {
  const StatsRegistry reg = make_sample_registry();
  const std::string text = json_of(reg);
  const ordered_json j = ordered_json::parse(text);

  // Top-level order follows first registration: device, then host.
  std::vector<std::string> top;
  for (auto it = j.begin(); it != j.end(); ++it) top.push_back(it.key());
  EXPECT_EQ(top, (std::vector<std::string>{"device", "host"}));
  std::vector<std::string> device;
  for (auto it = j["device"].begin(); it != j["device"].end(); ++it) device.push_back(it.key());
  EXPECT_EQ(device, (std::vector<std::string>{"clock", "engines", "dma", "unset", "empty"}));

  EXPECT_EQ(j["device"]["clock"], "tensor 2400 MHz");
  const auto& busy = j["device"]["engines"]["tensor"]["busy_cycles"];
  EXPECT_TRUE(busy.is_number_integer());
  EXPECT_EQ(busy.get<std::uint64_t>(), 1200u);
  EXPECT_EQ(j["device"]["engines"]["vector"]["busy_cycles"], 7);
  EXPECT_EQ(j["device"]["engines"]["tensor"]["utilisation"].get<double>(), 0.1);
  EXPECT_TRUE(j["device"]["engines"]["tensor"]["steps"].is_number_integer());
  EXPECT_TRUE(j["device"]["unset"].is_null());
  EXPECT_EQ(j["host"]["dispatches"], 3);

  EXPECT_EQ(j["device"]["dma"]["latency"].get<double>(), 5.0);
  EXPECT_TRUE(j["device"]["empty"].is_null());
}

TEST(WriteStatsJson, FormattingIsTwoSpaceIndentedWithTrailingNewline) {
  StatsRegistry reg;
  reg.add_counter("a.b", "", "") += 1;
  reg.add_value("c", "", "").set(0.5);
  EXPECT_EQ(json_of(reg), "{\n  \"a\": {\n    \"b\": 1\n  },\n  \"c\": 0.5\n}\n");
}

TEST(WriteStatsJson, IsDeterministic) {
  const StatsRegistry a = make_sample_registry();
  const StatsRegistry b = make_sample_registry();
  EXPECT_EQ(json_of(a), json_of(a));
  EXPECT_EQ(json_of(a), json_of(b));
  EXPECT_EQ(text_of(a), text_of(b));
}

TEST(WriteStatsJson, NonFiniteNumbersBecomeNull) {
  StatsRegistry reg;
  reg.add_value("nan", "", "").set(std::nan(""));
  reg.add_value("inf", "", "").set(std::numeric_limits<double>::infinity());
  const ordered_json j = ordered_json::parse(json_of(reg));
  EXPECT_TRUE(j["nan"].is_null());
  EXPECT_TRUE(j["inf"].is_null());
}

TEST(WriteStatsJson, EmptyRegistryIsEmptyObject) {
  StatsRegistry reg;
  EXPECT_EQ(json_of(reg), "{}\n");
}

TEST(WriteStatsJson, MergesExtraJson) {
  const StatsRegistry reg = make_sample_registry();
  ordered_json extra = ordered_json::object();
  extra["workload"] = {{"name", "bert"}, {"steps", 2}};
  extra["device"]["report"] = {{"cold_ms", 1.5}};
  std::ostringstream os;
  write_stats_json(reg, os, extra);
  const ordered_json j = ordered_json::parse(os.str());
  EXPECT_EQ(j["workload"]["name"], "bert");
  EXPECT_EQ(j["device"]["report"]["cold_ms"], 1.5);
  EXPECT_EQ(j["device"]["engines"]["tensor"]["busy_cycles"], 1200);
  EXPECT_EQ(j.back(), extra["workload"]);  // new top-level keys come after the stats
  EXPECT_EQ(os.str().back(), '\n');
}

TEST(WriteStatsJson, ExtraCollisionsThrow) {
  const StatsRegistry reg = make_sample_registry();
  std::ostringstream os;
  ordered_json leaf = ordered_json::object();
  leaf["host"]["dispatches"] = 4;
  expect_invalid([&] { write_stats_json(reg, os, leaf); }, "host.dispatches");
  ordered_json replace_object = ordered_json::object();
  replace_object["device"] = 1;
  expect_invalid([&] { write_stats_json(reg, os, replace_object); }, "device");
  expect_invalid([&] { write_stats_json(reg, os, ordered_json::array()); }, "object");
}

TEST(WriteStatsText, OneAlignedLinePerStat) {
  StatsRegistry reg;
  reg.add_counter("device.engines.tensor.busy_cycles", "cycles", "cycles the engine was busy") +=
      1200;
  reg.add_value("device.util", "", "busy / total").set(2.0 / 3.0);
  reg.add_text("device.clock", "", "").set("tensor 2400 MHz");
  reg.add_value("n", "steps", "").set(-4);
  reg.add_value("unset", "", "");

  const std::vector<std::string> lines = lines_of(text_of(reg));
  ASSERT_EQ(lines.size(), 5u);
  // Name column is 33 wide (the longest name) plus two spaces; value column is as wide as the
  // longest value ("\"tensor 2400 MHz\"", 17) plus two spaces.
  EXPECT_EQ(lines[0],
            "device.engines.tensor.busy_cycles  1200               "
            "# cycles \u2014 cycles the engine was busy");
  EXPECT_EQ(lines[1], "device.util                        0.666667           # busy / total");
  EXPECT_EQ(lines[2], "device.clock                       \"tensor 2400 MHz\"");
  EXPECT_EQ(lines[3], "n                                  -4                 # steps");
  EXPECT_EQ(lines[4], "unset                              -");
}

TEST(WriteStatsText, EscapesTextValues) {
  StatsRegistry reg;
  reg.add_text("t", "", "").set("say \"hi\"\n");
  EXPECT_EQ(text_of(reg), "t  \"say \\\"hi\\\"\\n\"\n");
}

// Registrations interleaved in two orders (as cores running in another order register their
// lazy stats): grouped by 2-segment scope, both registries write the same text, each scope's
// stats together where its first stat stood and in their own order.
TEST(StatsRegistry, GroupScopesIsAStablePartitionByScope) {
  StatsRegistry a, b;
  a.add_counter("chip0.core0.x", "", "");
  a.add_counter("chip0.core1.x", "", "");
  a.add_value("system.total", "", "");
  a.add_counter("chip0.core1.q7", "", "");
  a.add_counter("chip0.core0.q3", "", "");
  a.add_counter("chip0.core0.q1", "", "");
  b.add_counter("chip0.core0.x", "", "");
  b.add_counter("chip0.core1.x", "", "");
  b.add_value("system.total", "", "");
  b.add_counter("chip0.core0.q3", "", "");
  b.add_counter("chip0.core1.q7", "", "");
  b.add_counter("chip0.core0.q1", "", "");
  EXPECT_NE(text_of(a), text_of(b));
  a.group_scopes(2);
  b.group_scopes(2);
  EXPECT_EQ(text_of(a), text_of(b));
  std::vector<std::string> names;
  for (const Stat* s : a.stats()) names.push_back(s->name());
  EXPECT_EQ(names, (std::vector<std::string>{"chip0.core0.x", "chip0.core0.q3", "chip0.core0.q1",
                                             "chip0.core1.x", "chip0.core1.q7", "system.total"}));
}

// copy_scope: existing twins set, missing ones registered, all in the source's order, every kind's
// value (an unset Value stays unset); other scopes untouched; bad scopes and kinds throw.
TEST(StatsRegistry, CopyScopeSetsAndRegistersTwins) {
  StatsRegistry reg;
  reg.add_counter("chip0.core0.busy", "cycles", "busy") += 7;
  reg.add_value("chip0.core0.util", "fraction", "utilisation").set(0.25);
  reg.add_value("chip0.core0.unset", "", "never set");
  reg.add_text("chip0.core0.clock", "", "clock").set("2400 MHz");
  reg.add_counter("chip0.core0.q.q3", "", "lazy queue") += 3;
  reg.add_counter("chip0.core00.other", "", "not in the scope") += 1;
  reg.add_counter("chip0.core1.busy", "cycles", "busy");
  reg.add_value("chip0.core1.unset", "", "never set").set(int64_t{5});
  reg.copy_scope("chip0.core0", "chip0.core1");
  EXPECT_EQ(reg.find_as<Counter>("chip0.core1.busy")->value(), 7u);
  EXPECT_DOUBLE_EQ(reg.find_as<Value>("chip0.core1.util")->as_double(), 0.25);
  EXPECT_EQ(reg.find_as<Value>("chip0.core1.unset")->type(), Value::Type::kUnset);
  EXPECT_EQ(reg.find_as<Text>("chip0.core1.clock")->value(), "2400 MHz");
  EXPECT_EQ(reg.find_as<Counter>("chip0.core1.q.q3")->value(), 3u);
  EXPECT_EQ(reg.find_as<Counter>("chip0.core1.q.q3")->description(), "lazy queue");
  EXPECT_EQ(reg.find("chip0.core1.other"), nullptr);
  // The twins, registered first (busy, unset) or last, stand in the source's order.
  std::vector<std::string> twins;
  for (size_t k = 6; k < reg.stats().size(); ++k) twins.push_back(reg.stats()[k]->name());
  EXPECT_EQ(twins,
            (std::vector<std::string>{"chip0.core1.busy", "chip0.core1.util", "chip0.core1.unset",
                                      "chip0.core1.clock", "chip0.core1.q.q3"}));
  EXPECT_EQ(reg.find_as<Counter>("chip0.core0.busy")->value(), 7u);
  expect_invalid([&] { reg.copy_scope("chip0.core0", "chip0.core0"); }, "cannot be copied");
  expect_invalid([&] { reg.copy_scope("chip0", "chip0.core2"); }, "cannot be copied");
  reg.add_text("chip0.core2.busy", "", "");
  expect_invalid([&] { reg.copy_scope("chip0.core0", "chip0.core2"); }, "not of the kind");
}

}  // namespace
}  // namespace wallsim::traces
