// Plan files: exact round trips, canonical text, and one-line errors (never crashes) for
// malformed, truncated, garbled or hostile input.
#include "wallsim/isa/plan_io.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "test_plans.h"

namespace wallsim::isa {

using base::InputError;
using base::Json;
namespace {

using testing::example_json;
using testing::example_path;

const char* kExamples[] = {"matmul", "vector_add", "softmax", "gather"};

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The error message of parsing `j`, or "" when it parses.
std::string parse_error(const Json& j) {
  try {
    plan_sequence_from_json(j);
    return "";
  } catch (const InputError& e) {
    return e.what();
  }
}

TEST(PlanIo, ExamplesRoundTripExactly) {
  for (const char* name : kExamples) {
    PlanSequence seq = plan_sequence_from_json(example_json(name));
    Json written = to_json(seq);
    EXPECT_EQ(plan_sequence_from_json(written), seq) << name;
    EXPECT_EQ(to_json(plan_sequence_from_json(written)), written) << name;
  }
}

TEST(PlanIo, ExampleFilesAreInCanonicalForm) {
  for (const char* name : kExamples) {
    PlanSequence seq = read_plan_file(example_path(name));
    EXPECT_EQ(format_json(to_json(seq)), read_text(example_path(name))) << name;
  }
}

TEST(PlanIo, WriteThenReadFile) {
  PlanSequence seq = read_plan_file(example_path("softmax"));
  seq.plans.push_back(seq.plans[0]);
  seq.plans[1].name = "second";
  std::string path = ::testing::TempDir() + "/roundtrip_plan.json";
  write_plan_file(seq, path);
  EXPECT_EQ(read_plan_file(path), seq);
  std::ifstream tmp(path + ".tmp");
  EXPECT_FALSE(tmp.good()) << "temporary file left behind";
  std::remove(path.c_str());
}

TEST(PlanIo, RoundTripsEveryOptionalField) {
  Json j = example_json("softmax");
  Json& plan = j["plans"][0];
  plan["scalars"] = Json::array({{{"name", "len"}, {"min", 1}, {"max", 512}}});
  Json& act = plan["streams"][2]["instructions"][0];
  act["scale"] = 0.125;
  act["bias"] = -1.5;
  Json& ts = plan["streams"][1]["instructions"][2];
  ts["scalar"] = "len";
  Json& dma = plan["streams"][0]["instructions"][0];
  dma["src"]["scalar"] = Json::array({"len", 0});
  PlanSequence seq = plan_sequence_from_json(j);
  EXPECT_EQ(seq.plans[0].streams[1].instructions[2].scalar.scalar, 0);
  EXPECT_EQ(seq.plans[0].streams[2].instructions[0].scale, 0.125);
  EXPECT_EQ(plan_sequence_from_json(to_json(seq)), seq);
}

TEST(PlanIo, ErrorsNameTheJsonPath) {
  Json j = example_json("vector_add");
  j["plans"][0]["streams"][2]["instructions"][0]["lhs"]["buf"] = "nope";
  EXPECT_EQ(parse_error(j),
            "plans[0].streams[2].instructions[0].lhs.buf: no buffer or tensor named \"nope\"");

  j = example_json("vector_add");
  j["plans"][0]["streams"][2]["instructions"][0]["alu"] = "plus";
  EXPECT_EQ(parse_error(j), "plans[0].streams[2].instructions[0].alu: unknown alu op \"plus\"");

  j = example_json("vector_add");
  j["plans"][0]["streams"][2]["instructions"][0]["colour"] = 1;
  EXPECT_EQ(parse_error(j), "plans[0].streams[2].instructions[0].colour: unknown key");

  j = example_json("vector_add");
  j["plans"][0]["streams"][2]["instructions"][0].erase("rhs");
  EXPECT_EQ(parse_error(j), "plans[0].streams[2].instructions[0]: missing key \"rhs\"");

  j = example_json("vector_add");
  j["plans"][0]["buffers"][0]["partitions"] = Json::array({0});
  EXPECT_EQ(parse_error(j),
            "plans[0].buffers[0].partitions: expected a two-element array, got [0]");

  j = example_json("vector_add");
  j["plans"][0]["streams"][0]["instructions"][0]["wait"] = Json::array({{"ghost", 1}});
  EXPECT_EQ(parse_error(j),
            "plans[0].streams[0].instructions[0].wait[0][0]: no semaphore named \"ghost\"");

  j = example_json("vector_add");
  j["version"] = 7;
  EXPECT_NE(parse_error(j).find("version: unsupported plan format version 7"), std::string::npos);
}

TEST(PlanIo, RejectsHostileValues) {
  auto with = [](const std::string& pointer, const Json& value) {
    Json j = example_json("vector_add");
    j[Json::json_pointer(pointer)] = value;
    return parse_error(j);
  };
  const std::string dst = "/plans/0/streams/2/instructions/0/dst";
  EXPECT_NE(with(dst + "/free/0/0", -5), "");
  EXPECT_NE(with(dst + "/free/0/0", 1e300), "");
  EXPECT_NE(with(dst + "/free/0/0", Json::parse("18446744073709551615")), "");
  EXPECT_NE(with(dst + "/free/0/1", int64_t{1} << 62), "");
  EXPECT_NE(with(dst + "/free", Json::parse("[[1,1],[1,1],[1,1],[1,1],[1,1]]")), "");
  EXPECT_NE(with(dst + "/partitions", Json::parse("[0, 2147483648]")), "");
  EXPECT_NE(with("/plans/0/tensors/0/shape", Json::parse("[1099511627776, 1099511627776]")), "");
  EXPECT_NE(with("/plans/0/tensors/0/name", 5), "");
  EXPECT_NE(with("/plans/0/streams", Json::object()), "");
  EXPECT_NE(with("/plans/0/buffers/0/name", "x"), "");  // duplicate of tensor x
  EXPECT_NE(with("/plans", Json::array()), "");
  EXPECT_NE(parse_error(Json::array()), "");
  EXPECT_NE(parse_error(Json(nullptr)), "");
}

TEST(PlanIo, DeeplyNestedInputIsAnErrorNotACrash) {
  std::string deep(100000, '[');
  std::string path = ::testing::TempDir() + "/deep_plan.json";
  std::ofstream(path) << deep;
  EXPECT_THROW(read_plan_file(path), InputError);
  std::remove(path.c_str());
}

TEST(PlanIo, TruncatedAndGarbledFilesGiveOneLineErrors) {
  std::string text = read_text(example_path("softmax"));
  std::string path = ::testing::TempDir() + "/garbled_plan.json";
  auto check = [&](const std::string& content) {
    std::ofstream(path, std::ios::trunc | std::ios::binary) << content;
    try {
      read_plan_file(path);
    } catch (const InputError& e) {
      std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
    }
  };
  for (size_t cut = 0; cut < text.size(); cut += 7) check(text.substr(0, cut));
  std::mt19937 rng(42);
  const char noise[] = "{}[]\",:0-9ae \x01\xff";
  for (int trial = 0; trial < 300; ++trial) {
    std::string g = text;
    for (int k = 0; k < 3; ++k) g[rng() % g.size()] = noise[rng() % (sizeof(noise) - 1)];
    check(g);
  }
  std::remove(path.c_str());
}

TEST(PlanIo, MissingFile) { EXPECT_THROW(read_plan_file("/nonexistent/plan.json"), InputError); }

TEST(PlanIo, FormatKeepsShortValuesOnOneLine) {
  Json j = Json::parse(R"({"a": [1, 2], "b": {"c": "d"}})");
  EXPECT_EQ(format_json(j, 100), "{\"a\": [1, 2], \"b\": {\"c\": \"d\"}}\n");
  EXPECT_EQ(format_json(j, 20), "{\n  \"a\": [1, 2],\n  \"b\": {\"c\": \"d\"}\n}\n");
}

}  // namespace
}  // namespace wallsim::isa
