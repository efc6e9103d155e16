// Tests for ChromeTraceWriter.
#include "wallsim/traces/chrome_trace.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../support/trace_overlap.h"
#include "wallsim/traces/trace_sink.h"

namespace wallsim::traces {
namespace {

using nlohmann::json;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Events with the given phase, in file order.
std::vector<json> events_with_phase(const json& trace, const std::string& ph) {
  std::vector<json> out;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == ph) out.push_back(e);
  }
  return out;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// A fresh, empty directory under the system temp dir (unique per process and test), removed at
// the end of the test.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    m_path = std::filesystem::temp_directory_path() /
             (std::string("wallsim_traces_") + std::to_string(::getpid()) + "_" +
              info->test_suite_name() + "_" + info->name());
    std::filesystem::remove_all(m_path);
    std::filesystem::create_directories(m_path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(m_path, ec);
  }
  const std::filesystem::path& path() const { return m_path; }

 private:
  std::filesystem::path m_path;
};

TEST(ChromeTraceWriter, EmptyTraceIsValidJson) {
  std::ostringstream os;
  ChromeTraceWriter writer(os);
  EXPECT_TRUE(writer.enabled());
  writer.finish();
  const json trace = json::parse(os.str());
  EXPECT_TRUE(trace.at("traceEvents").is_array());
  EXPECT_TRUE(trace.at("traceEvents").empty());
  EXPECT_EQ(trace.at("displayTimeUnit"), "ns");
  EXPECT_TRUE(trace.at("metadata").contains("trace_format"));
  EXPECT_EQ(os.str().back(), '\n');
}

TEST(ChromeTraceWriter, DeclareTrackEmitsNamesAndSortIndicesOnce) {
  std::ostringstream os;
  ChromeTraceWriter writer(os);
  const Track host = writer.declare_track(1, "host", 1, "dispatch");
  const Track tensor = writer.declare_track(2, "device0 core0", 1, "tensor");
  const Track vector = writer.declare_track(2, "device0 core0", 2, "vector");
  const Track again = writer.declare_track(2, "device0 core0", 1, "tensor");
  writer.finish();

  EXPECT_EQ(host.index, 0u);
  EXPECT_EQ(tensor.index, 1u);
  EXPECT_EQ(vector.index, 2u);
  EXPECT_EQ(again.index, tensor.index);
  EXPECT_EQ(again.pid, 2);
  EXPECT_EQ(again.tid, 1);

  const json trace = json::parse(os.str());
  const std::vector<json> meta = events_with_phase(trace, "M");
  ASSERT_EQ(meta.size(), 10u);  // 2 processes x 2 + 3 threads x 2
  int process_names = 0;
  int thread_names = 0;
  for (const json& e : meta) {
    if (e["name"] == "process_name") ++process_names;
    if (e["name"] == "thread_name") ++thread_names;
  }
  EXPECT_EQ(process_names, 2);
  EXPECT_EQ(thread_names, 3);

  EXPECT_EQ(meta[0]["name"], "process_name");
  EXPECT_EQ(meta[0]["pid"], 1);
  EXPECT_EQ(meta[0]["args"]["name"], "host");
  EXPECT_EQ(meta[1]["name"], "process_sort_index");
  EXPECT_EQ(meta[1]["args"]["sort_index"], 0);
  EXPECT_EQ(meta[2]["name"], "thread_name");
  EXPECT_EQ(meta[2]["tid"], 1);
  EXPECT_EQ(meta[2]["args"]["name"], "dispatch");
  EXPECT_EQ(meta[3]["name"], "thread_sort_index");
  EXPECT_EQ(meta[5]["name"], "process_sort_index");
  EXPECT_EQ(meta[5]["args"]["sort_index"], 1);
  EXPECT_EQ(meta[9]["name"], "thread_sort_index");
  EXPECT_EQ(meta[9]["args"]["sort_index"], 2);
}

TEST(ChromeTraceWriter, RenamingAProcessOrThreadThrows) {
  std::ostringstream os;
  ChromeTraceWriter writer(os);
  writer.declare_track(1, "host", 1, "dispatch");
  EXPECT_THROW(writer.declare_track(1, "other", 2, "x"), std::invalid_argument);
  EXPECT_THROW(writer.declare_track(1, "host", 1, "other"), std::invalid_argument);
  writer.finish();
  EXPECT_NO_THROW(json::parse(os.str()));
}

TEST(ChromeTraceWriter, SlicesHaveWholeNanosecondTimes) {
  std::ostringstream os;
  ChromeTraceWriter writer(os);
  const Track t = writer.declare_track(3, "core", 7, "tensor");
  TraceArgs args;
  const std::string op = "matmul_0";
  args.add("bytes", 4096).add("ratio", 0.5).add("op", op).add("big", std::uint64_t{1} << 63);
  writer.slice(t, 1234567, 1000, "matmul", "tensor", args);
  writer.slice(t, 1235567, 0, "zero", "", {});  // starts exactly where the last one ended
  writer.slice(t, 1235567, 0, "zero again", "", {});
  writer.slice(t, 5000000000000, 999499, "late", "tensor", {});  // 999.499 ns rounds down
  writer.finish();

  const std::vector<std::string> lines = lines_of(os.str());
  // Header, 4 metadata events, 4 slices, then the three closing lines.
  ASSERT_EQ(lines.size(), 12u);
  EXPECT_EQ(lines[0], "{\"traceEvents\":[");
  // `dur` is 1 ns, written as the largest double whose sum with ts does not pass the end
  // (the decimal 0.001 would: 1.235 + 0.001 > 1.236 as the reals the doubles hold).
  EXPECT_EQ(lines[5], R"({"ph":"X","pid":3,"tid":7,"ts":1.235,"dur":0.0009999999999998899,)"
                      R"("name":"matmul","cat":"tensor","args":{"bytes":4096,"ratio":0.5,)"
                      R"("op":"matmul_0","big":9223372036854775808}},)");
  EXPECT_EQ(lines[6], R"({"ph":"X","pid":3,"tid":7,"ts":1.236,"dur":0.000,"name":"zero"},)");
  EXPECT_EQ(lines[8], R"({"ph":"X","pid":3,"tid":7,"ts":5000000.000,"dur":0.9989999998360872,)"
                      R"("name":"late","cat":"tensor"})");
  EXPECT_EQ(lines[9], "],");
  EXPECT_EQ(lines[10], "\"displayTimeUnit\":\"ns\",");

  const json trace = json::parse(os.str());
  const std::vector<json> slices = events_with_phase(trace, "X");
  ASSERT_EQ(slices.size(), 4u);
  EXPECT_EQ(slices[0]["args"]["op"], "matmul_0");
  EXPECT_EQ(slices[0]["args"]["bytes"], 4096);
}

// speedscope's case: the track's times less its first ts, then added.
TEST(ChromeTraceWriter, BackToBackSlicesDoNotOverlapAfterRebasing) {
  std::ostringstream os;
  ChromeTraceWriter writer(os);
  const Track t = writer.declare_track(1, "core0", 100, "dma queue 0");
  writer.slice(t, 10020630464000, 2861000, "a", "", {});
  writer.slice(t, 10020633325000, 2861000, "b", "", {});
  writer.finish();
  const auto overlaps = wallsim::test::trace_overlaps(json::parse(os.str()));
  EXPECT_TRUE(overlaps.empty()) << wallsim::test::describe(overlaps);
}

// The issue's case: ts 209.572 + dur 190.946 is 400.51800000000003 in doubles, past a next
// slice at 400.518. The writer's dur keeps the sum at 400.518 and still rounds to 190946 ns.
TEST(ChromeTraceWriter, BackToBackSlicesDoNotOverlapInDoubles) {
  std::ostringstream os;
  ChromeTraceWriter writer(os);
  const Track t = writer.declare_track(1, "core0", 1, "host");
  writer.slice(t, 209572000, 190946000, "a", "", {});
  writer.slice(t, 400518000, 1000, "b", "", {});
  writer.finish();
  const json trace = json::parse(os.str());
  const std::vector<json> slices = events_with_phase(trace, "X");
  ASSERT_EQ(slices.size(), 2u);
  const double ts = slices[0]["ts"].get<double>();
  const double dur = slices[0]["dur"].get<double>();
  EXPECT_EQ(209.572 + 190.946, 400.51800000000003);  // the viewer arithmetic that overlapped
  EXPECT_LE(ts + dur, slices[1]["ts"].get<double>());
  EXPECT_EQ(std::llround(dur * 1000.0), 190946);
  EXPECT_TRUE(wallsim::test::trace_overlaps(trace).empty());
}

// Back-to-back slices of random picosecond lengths, on several tracks and over a long time
// range: none overlaps under either viewer arithmetic, and each rounds to its whole-ns length.
TEST(ChromeTraceWriter, RandomBackToBackSlicesNeverOverlap) {
  std::ostringstream os;
  ChromeTraceWriter writer(os);
  std::vector<Track> tracks;
  for (int i = 0; i < 4; ++i) tracks.push_back(writer.declare_track(1, "core0", i, "t"));
  std::vector<TimePs> at = {0, 7, 10020630464000, 123456789012345};  // 0 to 123 s
  std::uint64_t x = 12345;
  for (int i = 0; i < 40000; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const std::size_t k = (x >> 33) % tracks.size();
    const TimePs dur = static_cast<TimePs>((x >> 13) % (i % 2 == 0 ? 2000 : 50000000));
    writer.slice(tracks[k], at[k], dur, "s", "", {});
    at[k] += dur + ((x >> 50) % 3 == 0 ? static_cast<TimePs>((x >> 40) % 1500) : 0);
  }
  writer.finish();
  std::size_t checked = 0;
  const auto overlaps = wallsim::test::trace_overlaps(json::parse(os.str()), &checked);
  EXPECT_EQ(checked, 40000u);
  EXPECT_TRUE(overlaps.empty()) << wallsim::test::describe(overlaps);
}

// The checker itself finds each kind of overlap.
TEST(TraceOverlapCheck, FindsBothArithmetics) {
  const json doubles = json::parse(R"({"traceEvents":[
    {"ph":"X","pid":1,"tid":1,"ts":209.572,"dur":190.946,"name":"a"},
    {"ph":"X","pid":1,"tid":1,"ts":400.518,"dur":1,"name":"b"}]})");
  const auto d = wallsim::test::trace_overlaps(doubles);
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d[0].arithmetic, "double");
  // speedscope subtracts the first ts: 10020633.325 - 10020630.464 is 2.8609999995678663 in
  // doubles, before the first slice's 2.861 ends.
  const json rebased = json::parse(R"({"traceEvents":[
    {"ph":"X","pid":1,"tid":1,"ts":10020630.464,"dur":2.861,"name":"a"},
    {"ph":"X","pid":1,"tid":1,"ts":10020633.325,"dur":1,"name":"b"}]})");
  const auto rb = wallsim::test::trace_overlaps(rebased);
  ASSERT_EQ(rb.size(), 1u);
  EXPECT_EQ(rb[0].arithmetic, "rebased");
  const json rounded = json::parse(R"({"traceEvents":[
    {"ph":"X","pid":1,"tid":1,"ts":0.0006,"dur":0.0006,"name":"a"},
    {"ph":"X","pid":1,"tid":1,"ts":0.0012,"dur":1,"name":"b"},
    {"ph":"X","pid":1,"tid":2,"ts":0.0006,"dur":0.0006,"name":"other track"}]})");
  const auto r = wallsim::test::trace_overlaps(rounded);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].arithmetic, "whole-ns");
  EXPECT_EQ(r[0].track, "1/1");
}

TEST(ChromeTraceWriter, NegativeTimesRoundHalfUp) {
  std::ostringstream os;
  ChromeTraceWriter writer(os);
  const Track t = writer.declare_track(1, "p", 1, "t");
  writer.instant(t, -1, "before zero", "", {});
  writer.instant(t, -1234567, "earlier", "", {});
  writer.instant(t, -1500, "half", "", {});
  writer.finish();
  EXPECT_NE(os.str().find("\"ts\":0.000,"), std::string::npos);  // -1 ps rounds to 0 ns
  EXPECT_NE(os.str().find("\"ts\":-1.235,"), std::string::npos);
  EXPECT_NE(os.str().find("\"ts\":-0.001,"), std::string::npos);  // -1.5 ns: half up
}

TEST(ChromeTraceWriter, InstantsCountersFlowsAndMetadata) {
  std::ostringstream os;
  ChromeTraceWriter writer(os);
  const Track host = writer.declare_track(1, "host", 1, "dispatch");
  const Track dev = writer.declare_track(2, "device", 1, "tensor");
  writer.slice(host, 0, 500000, "launch", "host", {});
  writer.flow_begin(host, 250000, 42, "dispatch");
  writer.slice(dev, 1000000, 2000000, "kernel", "device", {});
  writer.flow_end(dev, 1000000, 42, "dispatch");
  writer.instant(dev, 1500000, "sync", "device", TraceArgs().add("queue", 3));
  writer.counter(2, "sbuf_occupancy", 1000000, "bytes", 65536);
  writer.counter(2, "hbm_bandwidth", 1000000, "gbps", 12.75);
  writer.set_metadata("config", "chip.json");
  writer.set_metadata("workload", "bert");
  writer.set_metadata("config", "chip2.json");
  writer.finish();

  const json trace = json::parse(os.str());
  const std::vector<json> instants = events_with_phase(trace, "i");
  ASSERT_EQ(instants.size(), 1u);
  EXPECT_EQ(instants[0]["s"], "t");
  EXPECT_EQ(instants[0]["args"]["queue"], 3);

  const std::vector<json> counters = events_with_phase(trace, "C");
  ASSERT_EQ(counters.size(), 2u);
  EXPECT_EQ(counters[0]["pid"], 2);
  EXPECT_EQ(counters[0]["name"], "sbuf_occupancy");
  EXPECT_EQ(counters[0]["args"]["bytes"], 65536);
  EXPECT_EQ(counters[1]["args"]["gbps"], 12.75);
  EXPECT_NE(os.str().find(R"("ts":1.000,"name":"sbuf_occupancy","args":{"bytes":65536}})"),
            std::string::npos);

  const std::vector<json> starts = events_with_phase(trace, "s");
  const std::vector<json> ends = events_with_phase(trace, "f");
  ASSERT_EQ(starts.size(), 1u);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(starts[0]["id"], 42);
  EXPECT_EQ(ends[0]["id"], 42);
  EXPECT_EQ(starts[0]["name"], ends[0]["name"]);
  EXPECT_EQ(starts[0]["cat"], ends[0]["cat"]);
  EXPECT_EQ(starts[0]["pid"], 1);
  EXPECT_EQ(ends[0]["pid"], 2);
  EXPECT_EQ(ends[0]["bp"], "e");
  EXPECT_FALSE(starts[0].contains("bp"));
  EXPECT_EQ(ends[0]["ts"].get<double>(), 1.0);

  const json& meta = trace.at("metadata");
  EXPECT_EQ(meta.at("config"), "chip2.json");
  EXPECT_EQ(meta.at("workload"), "bert");
}

TEST(ChromeTraceWriter, NonFiniteCounterValuesAreNull) {
  std::ostringstream os;
  ChromeTraceWriter writer(os);
  writer.counter(1, "c", 0, "v", std::numeric_limits<double>::quiet_NaN());
  writer.finish();
  const json trace = json::parse(os.str());
  EXPECT_TRUE(trace["traceEvents"][0]["args"]["v"].is_null());
}

TEST(ChromeTraceWriter, EscapesHostileStrings) {
  const std::string hostile =
      std::string("quote\" backslash\\ newline\n tab\t cr\r nul") + '\0' +
      " bell\x07 esc\x1b del\x7f caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 </script>";
  std::ostringstream os;
  ChromeTraceWriter writer(os);
  const Track t = writer.declare_track(1, hostile, 2, hostile);
  TraceArgs args;
  args.add(hostile, hostile);
  writer.slice(t, 0, 1, hostile, hostile, args);
  writer.instant(t, 1, hostile, hostile, args);
  writer.counter(1, hostile, 2, hostile, 1.0);
  writer.flow_begin(t, 1, 1, hostile);
  writer.set_metadata(hostile, hostile);
  writer.finish();

  const std::string text = os.str();
  EXPECT_NE(text.find(R"(quote\" backslash\\ newline\u000a tab\u0009 cr\u000d nul\u0000)"),
            std::string::npos);
  EXPECT_NE(text.find(R"( bell\u0007 esc\u001b)"), std::string::npos);
  // One event per line: no raw control characters leak into the output.
  std::size_t raw_controls = 0;
  for (char c : text) {
    if (c != '\n' && static_cast<unsigned char>(c) < 0x20) ++raw_controls;
  }
  EXPECT_EQ(raw_controls, 0u);

  const json trace = json::parse(text);  // throws on invalid JSON or invalid UTF-8
  const std::vector<json> slices = events_with_phase(trace, "X");
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0]["name"], hostile);
  EXPECT_EQ(slices[0]["cat"], hostile);
  EXPECT_EQ(slices[0]["args"][hostile], hostile);
  EXPECT_EQ(events_with_phase(trace, "C")[0]["name"], hostile);
  EXPECT_EQ(events_with_phase(trace, "C")[0]["args"][hostile], 1.0);
  EXPECT_EQ(trace["metadata"][hostile], hostile);
  EXPECT_EQ(trace["traceEvents"][0]["args"]["name"], hostile);
}

TEST(ChromeTraceWriter, ReplacesInvalidUtf8) {
  const std::string bad = std::string("a\xff") + "b\xc3" + "\xe2\x82" + "\xed\xa0\x80" +
                          "\xc0\xaf" + "\xf4\x90\x80\x80" + "z\xe2\x82";  // truncated at end
  std::ostringstream os;
  ChromeTraceWriter writer(os);
  const Track t = writer.declare_track(1, "p", 1, "t");
  writer.slice(t, 0, 1, bad, "", {});
  writer.finish();
  const json trace = json::parse(os.str());
  const std::string name = events_with_phase(trace, "X")[0]["name"];
  // Each byte that does not start a valid sequence becomes one U+FFFD: overlong forms,
  // surrogates, code points above U+10FFFF and truncated sequences are all invalid.
  const std::string r = "\xef\xbf\xbd";
  std::string expected = "a" + r + "b";
  for (int i = 0; i < 12; ++i) expected += r;
  expected += "z" + r + r;
  EXPECT_EQ(name, expected);
}

TEST(ChromeTraceWriter, OverlappingSlicesThrowNamingTheTrack) {
  std::ostringstream os;
  ChromeTraceWriter writer(os);
  const Track t = writer.declare_track(2, "device0 core0", 1, "tensor");
  const Track other = writer.declare_track(2, "device0 core0", 2, "vector");
  writer.slice(t, 1000, 1000, "a", "", {});
  try {
    writer.slice(t, 1999, 10, "b", "", {});
    FAIL() << "expected std::logic_error";
  } catch (const std::logic_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("device0 core0/tensor"), std::string::npos) << what;
    EXPECT_NE(what.find("'b'"), std::string::npos) << what;
    EXPECT_NE(what.find("1999 ps"), std::string::npos) << what;
  }
  // Other tracks are independent; the failed slice did not move the track's end.
  EXPECT_NO_THROW(writer.slice(other, 1500, 10, "c", "", {}));
  EXPECT_NO_THROW(writer.slice(t, 2000, 0, "d", "", {}));
  EXPECT_THROW(writer.slice(t, 500, 10, "before", "", {}), std::logic_error);
  EXPECT_THROW(writer.slice(t, 3000, -1, "negative", "", {}), std::logic_error);
  writer.finish();
  const json trace = json::parse(os.str());
  EXPECT_EQ(events_with_phase(trace, "X").size(), 3u);
}

TEST(ChromeTraceWriter, UndeclaredTrackThrows) {
  std::ostringstream os;
  ChromeTraceWriter writer(os);
  EXPECT_THROW(writer.slice(Track{1, 1, 0}, 0, 1, "x", "", {}), std::invalid_argument);
  const Track t = writer.declare_track(1, "p", 1, "t");
  EXPECT_THROW(writer.slice(Track{1, 2, t.index}, 0, 1, "x", "", {}), std::invalid_argument);
  EXPECT_THROW(writer.flow_begin(Track{5, 5, 9}, 0, 1, "x"), std::invalid_argument);
}

TEST(ChromeTraceWriter, FinishIsIdempotentAndLaterEventsThrow) {
  std::ostringstream os;
  ChromeTraceWriter writer(os);
  const Track t = writer.declare_track(1, "p", 1, "t");
  writer.slice(t, 0, 10, "x", "", {});
  writer.finish();
  const std::string once = os.str();
  writer.finish();
  writer.finish();
  EXPECT_EQ(os.str(), once);
  EXPECT_THROW(writer.slice(t, 10, 10, "y", "", {}), std::logic_error);
  EXPECT_THROW(writer.counter(1, "c", 0, "v", 1), std::logic_error);
  EXPECT_THROW(writer.set_metadata("k", "v"), std::logic_error);
  EXPECT_THROW(writer.declare_track(1, "p", 2, "u"), std::logic_error);
  EXPECT_EQ(os.str(), once);
}

TEST(ChromeTraceWriter, OutputIsDeterministicAndStreamsLargeTraces) {
  const auto write = [](std::ostream& os) {
    ChromeTraceWriter writer(os);
    const Track a = writer.declare_track(1, "p", 1, "a");
    const Track b = writer.declare_track(1, "p", 2, "b");
    const std::string name = "slice with a long-ish name";
    for (TimePs i = 0; i < 20000; ++i) {
      writer.slice(i % 2 == 0 ? a : b, i * 1000, 999, name, "cat",
                   TraceArgs().add("i", i).add("x", static_cast<double>(i) / 3));
    }
    writer.finish();
  };
  std::ostringstream first;
  std::ostringstream second;
  write(first);
  write(second);
  EXPECT_EQ(first.str(), second.str());
  EXPECT_GT(first.str().size(), 1000000u);  // several buffer flushes
  const json trace = json::parse(first.str());
  EXPECT_EQ(trace["traceEvents"].size(), 20000u + 6u);  // 1 process and 2 threads: 6 metadata
  EXPECT_EQ(trace["traceEvents"].back()["args"]["i"], 19999);
}

TEST(ChromeTraceWriter, HugeEventsGrowTheBuffer) {
  std::ostringstream os;
  ChromeTraceWriter writer(os);
  const Track t = writer.declare_track(1, "p", 1, "t");
  const std::string huge(1 << 20, '\n');  // escapes to 6 MiB
  writer.slice(t, 0, 1, huge, "", {});
  writer.finish();
  const json trace = json::parse(os.str());
  EXPECT_EQ(events_with_phase(trace, "X")[0]["name"], huge);
}

TEST(ChromeTraceWriter, WritingToAPathLeavesOnlyTheFinishedFile) {
  TempDir dir;
  const std::string path = (dir.path() / "trace.json").string();
  {
    ChromeTraceWriter writer(path);
    const Track t = writer.declare_track(1, "p", 1, "t");
    writer.slice(t, 0, 10, "x", "", {});
    EXPECT_TRUE(std::filesystem::exists(path + ".tmp"));
    EXPECT_FALSE(std::filesystem::exists(path));
    writer.finish();
    writer.finish();
  }
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  ASSERT_TRUE(std::filesystem::exists(path));
  const json trace = json::parse(read_file(path));
  EXPECT_EQ(events_with_phase(trace, "X").size(), 1u);
}

TEST(ChromeTraceWriter, UnfinishedPathWriterLeavesNothing) {
  TempDir dir;
  const std::string path = (dir.path() / "trace.json").string();
  try {
    ChromeTraceWriter writer(path);
    const Track t = writer.declare_track(1, "p", 1, "t");
    writer.slice(t, 100, 10, "x", "", {});
    writer.slice(t, 0, 10, "overlap", "", {});  // throws; the run fails
  } catch (const std::logic_error&) {
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(ChromeTraceWriter, FinishReplacesAnOldTrace) {
  TempDir dir;
  const std::string path = (dir.path() / "trace.json").string();
  std::ofstream(path) << "old";
  ChromeTraceWriter writer(path);
  writer.finish();
  EXPECT_NO_THROW(json::parse(read_file(path)));
}

TEST(ChromeTraceWriter, UnopenablePathThrowsNamingIt) {
  TempDir dir;
  const std::string path = (dir.path() / "missing_dir" / "trace.json").string();
  try {
    ChromeTraceWriter writer(path);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(ChromeTraceWriter, FailedStreamThrowsOnFinish) {
  std::ostringstream os;
  ChromeTraceWriter writer(os);
  os.setstate(std::ios::badbit);
  EXPECT_THROW(writer.finish(), std::runtime_error);
  EXPECT_NO_THROW(writer.finish());
}

TEST(TraceArgs, HoldsTypedValuesInOrder) {
  const std::string s = "text";
  TraceArgs args;
  args.add("i", -5).add("u", 7u).add("d", 2.5f).add("s", s).add("lit", "literal");
  ASSERT_EQ(args.size(), 5u);
  EXPECT_EQ(args[0].type, TraceArgs::Type::kInt);
  EXPECT_EQ(args[0].i, -5);
  EXPECT_EQ(args[1].type, TraceArgs::Type::kUint);
  EXPECT_EQ(args[1].u, 7u);
  EXPECT_EQ(args[2].type, TraceArgs::Type::kDouble);
  EXPECT_EQ(args[2].d, 2.5);
  EXPECT_EQ(args[3].type, TraceArgs::Type::kString);
  EXPECT_EQ(args[3].s, "text");
  EXPECT_EQ(args[4].s, "literal");
  EXPECT_EQ(args[4].key, "lit");
}

TEST(TraceArgs, RejectsTooManyArguments) {
  TraceArgs args;
  for (std::size_t i = 0; i < TraceArgs::kMaxArgs; ++i) args.add("k", 1);
  EXPECT_THROW(args.add("k", 1), std::length_error);
}

}  // namespace
}  // namespace wallsim::traces
