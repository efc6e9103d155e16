// Strict JSON reading (issue 20): limits, duplicate keys, number overflow, special files, --set.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "wallsim/base/host_memory.h"
#include "wallsim/base/params.h"
#include "wallsim/runtime/config.h"

namespace wallsim::base {
namespace {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string temp(const std::string& name) {
  return ::testing::TempDir() + "/json_read_" + name + "_" + std::to_string(::getpid());
}

TEST(JsonRead, DuplicateKeysAreErrorsWithTheirPath) {
  EXPECT_EQ(error_of([] { parse_json(R"({"a": 1, "a": 2})", "f.json"); }),
            "f.json: a: duplicate key");
  EXPECT_EQ(error_of([] { parse_json(R"({"a": [0, {"b": {"c": 1, "c": 1}}]})", "f.json"); }),
            "f.json: a[1].b.c: duplicate key");
  // The same key in sibling objects is fine.
  EXPECT_NO_THROW(parse_json(R"([{"a": 1}, {"a": 2}])", "f.json"));
}

TEST(JsonRead, NestingIsLimitedWithoutRecursion) {
  const std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_NO_THROW(parse_json(ok, "f"));
  const std::string deep = "{\"name\":" + std::string(70000, '[') + std::string(70000, ']') + "}";
  EXPECT_EQ(error_of([&] { parse_json(deep, "d.json"); }).rfind("d.json: name", 0), 0u);
  EXPECT_NE(error_of([&] { parse_json(deep, "d.json"); }).find("nested deeper than 256 levels"),
            std::string::npos);
}

TEST(JsonRead, NumbersThatOverflowADoubleAreInputErrors) {
  EXPECT_EQ(error_of([] { parse_json("1e400", "x.json"); }),
            "x.json: number '1e400' does not fit a double");
  EXPECT_EQ(error_of([] { parse_json(R"({"p": [1, -2E8143421]})", "x.json"); }),
            "x.json: p[1]: number '-2E8143421' does not fit a double");
  EXPECT_EQ(parse_json("1e308", "x").get<double>(), 1e308);
}

TEST(JsonRead, SyntaxErrorsKeepNlohmannsPosition) {
  EXPECT_EQ(error_of([] {
              parse_json("{\"a\": [1,", "s.json");
            }).rfind("s.json: invalid JSON: parse error at line 1, column 10", 0),
            0u);
  EXPECT_NE(error_of([] { parse_json("{\"a\": \"\xff\"}", "s.json"); }).find("invalid JSON"),
            std::string::npos);
}

TEST(JsonRead, OnlyRegularFilesOfBoundedSizeAreRead) {
  const std::string dir = ::testing::TempDir();
  EXPECT_EQ(error_of([&] { read_json_file(dir); }), dir + ": is a directory, not a file");
  EXPECT_EQ(error_of([] { read_json_file("/dev/zero"); }), "/dev/zero: not a regular file");
  const std::string fifo = temp("fifo");
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { read_json_file(fifo); }), fifo + ": not a regular file");  // no hang
  ::unlink(fifo.c_str());
  const std::string big = temp("big");
  std::ofstream(big) << "[" << std::string(3 << 20, ' ') << "]";
  EXPECT_EQ(error_of([&] { read_json_file(big, 2 << 20); }),
            big + ": file larger than the limit of 2 MiB");
  EXPECT_NO_THROW(read_json_file(big));
  ::unlink(big.c_str());
  EXPECT_EQ(error_of([] { read_json_file("/nonexistent/x.json"); }),
            "/nonexistent/x.json: cannot open file");
}

TEST(JsonRead, Utf8Validation) {
  EXPECT_TRUE(valid_utf8("plain"));
  EXPECT_TRUE(valid_utf8("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));  // é € 😀
  EXPECT_FALSE(valid_utf8("\xff"));
  EXPECT_FALSE(valid_utf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(valid_utf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(valid_utf8("\xe2\x82"));          // truncated
}

TEST(JsonRead, OverridesAreCheckedAndBlamed) {
  Json j = Json::object();
  // Defect 3: invalid UTF-8 in a --set value was an internal error.
  EXPECT_EQ(error_of([&] { apply_override(j, "name=\xff"); }),
            "--set name: the assignment is not valid UTF-8");
  EXPECT_NE(error_of([&] { apply_override(j, R"(a={"x": 1, "x": 2})"); }).find("duplicate key"),
            std::string::npos);
  apply_override(j, "a=1e400");  // not JSON a double can hold: taken as a string
  EXPECT_EQ(j["a"], "1e400");
  // Defect 25: a misspelt parent created by --set is blamed on --set, not on the file.
  const std::string cfg = std::string(WALLSIM_SOURCE_DIR) + "/configs/tiny.json";
  EXPECT_EQ(error_of([&] { runtime::load_config(cfg, {"arch.sbufx.partitions=1"}); }),
            "--set arch.sbufx.partitions=1: arch.sbufx: unknown key (did you mean \"sbuf\"?)");
}

// Review F15: a cross-key check's message names the other key; an override of that key is
// blamed for it, and a key named only as part of a longer one is not.
TEST(JsonRead, InputErrorMentionsWholeKeysOnly) {
  const InputError e("runtime.aot.bucket_max", "is smaller than runtime.aot.bucket_min");
  EXPECT_TRUE(e.mentions("runtime.aot.bucket_min"));
  EXPECT_FALSE(e.mentions("runtime.aot.bucket_max"));  // the path, not the problem
  EXPECT_FALSE(e.mentions("runtime.aot.bucket"));
  EXPECT_FALSE(e.mentions("aot.bucket_min"));
  EXPECT_FALSE(e.mentions(""));
  EXPECT_TRUE(InputError("a", "b.c.").mentions("b.c"));
  EXPECT_FALSE(InputError("a", "b.c.d").mentions("b.c"));
}

TEST(HostMemory, EstimateBeyondTheHostIsAnInputError) {
  const int64_t avail = host_memory_available();
  if (avail < 0) GTEST_SKIP() << "no MemAvailable or cgroup limit on this host";
  EXPECT_NO_THROW(check_host_memory(1 << 20, "x", "--flag"));
  const std::string e = error_of([] { check_host_memory(INT64_MAX / 2, "plan.json", "--flag"); });
  EXPECT_EQ(e.rfind("plan.json: needs about ", 0), 0u) << e;
  EXPECT_NE(e.find("(--flag runs it anyway)"), std::string::npos) << e;
}

// Issue 39: 512 ranks made ~35k SystemC threads, two memory maps each, past the default
// vm.max_map_count of 65530; such a run is refused before its stacks are allocated.
TEST(HostMemory, ThreadsBeyondTheMapLimitAreAnInputError) {
  EXPECT_EQ(memory_maps_needed(1000, 500), 500 + 2000 + kSpareMaps);
  EXPECT_NO_THROW(check_memory_maps(2200, 300, 65530, "simulation"));
  EXPECT_NO_THROW(check_memory_maps(1 << 30, 300, -1, "simulation"));  // limit unknown
  const std::string e = error_of([] { check_memory_maps(35000, 300, 65530, "simulation"); });
  EXPECT_EQ(e.rfind("simulation: its 35000 SystemC threads need about 74396 memory maps", 0), 0u)
      << e;
  EXPECT_NE(e.find("vm.max_map_count is 65530"), std::string::npos) << e;
  EXPECT_GT(memory_maps_now(), 0);
}

// DMA queues spawn their threads on first use, within what the map limit leaves at the start.
TEST(HostMemory, ThreadsSpawnedAfterTheStartTakeFromABudget) {
  set_thread_budget(2, 1000);
  EXPECT_TRUE(take_thread());
  EXPECT_TRUE(take_thread());
  EXPECT_FALSE(take_thread());
  const std::string e = thread_budget_text();
  EXPECT_NE(e.find("more SystemC threads than the 2 that vm.max_map_count (1000)"),
            std::string::npos)
      << e;
  set_thread_budget(-1, -1);  // unlimited
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(take_thread());
}

}  // namespace
}  // namespace wallsim::base
