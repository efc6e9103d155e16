// Program files (frontends/torch): captured fixtures read, every bad input a one-line error
// naming the file and the event.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "wallsim/base/params.h"
#include "wallsim/torch/program.h"

namespace wallsim::torch {
namespace {

std::string write_program(const std::string& name, const std::string& events,
                          const std::string& extra = "") {
  const std::string path =
      ::testing::TempDir() + "/" + name + "_" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << R"({"format": "wallsim-program", "version": 1, "name": ")" << name << "\""
                      << extra << R"(, "events": [)" << events << "]}";
  return path;
}

// The error reading `events`, or "" when it reads.
std::string error_of(const std::string& events, const std::string& extra = "") {
  const std::string path = write_program("bad", events, extra);
  try {
    read_program_file(path);
  } catch (const base::InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
    return what.substr(path.size() + 2);
  }
  return "";
}

const char* kInput = R"({"ev":"input","id":0,"name":"x","dtype":"fp32","shape":[4,8]})";
const char* kWeight = R"({"ev":"weight","id":1,"name":"w","dtype":"fp32","shape":[8,3]})";

TEST(ProgramReader, ReadsCapturedTrainingSteps) {
  const Program p = read_program_file(PROGRAMS_DIR "/mlp_adam.json");
  EXPECT_EQ(p.name, "mlp");
  // Two training steps (the capture drops a last step of frees only).
  EXPECT_EQ(p.steps.size(), 2u);
  int ops = 0, reads = 0;
  for (const Event& e : p.events) {
    ops += e.kind == EventKind::op;
    reads += e.kind == EventKind::read;
    if (e.kind == EventKind::op) {
      EXPECT_FALSE(e.aten.empty());
    }
  }
  EXPECT_GT(ops, 100);
  EXPECT_EQ(reads, 14);  // two losses and Adam's step counts
  EXPECT_TRUE(std::filesystem::exists(value_file(p, 'r', 13)));
}

TEST(ProgramReader, StepsSplitAtStepEvents) {
  const std::string path = write_program(
      "steps", std::string(kInput) + R"(, {"ev":"step"}, {"ev":"read","id":0,"reason":"item"},
      {"ev":"step"})");
  const Program p = read_program_file(path);
  ASSERT_EQ(p.steps.size(), 2u);  // a step that ends the file adds no empty step
  EXPECT_EQ(p.steps[0], std::make_pair(size_t{0}, size_t{1}));
  EXPECT_EQ(p.steps[1], std::make_pair(size_t{2}, size_t{3}));
  EXPECT_EQ(p.events[2].read_index, 0);
}

TEST(ProgramReader, RelativeAttributesResolveAgainstTheCapturedExtent) {
  const std::string path =
      write_program("rel", R"({"ev":"input","id":0,"name":"x","dtype":"fp32","shape":[1,5,8],
      "dim_names":[null,"seq",null]},
      {"ev":"op","id":1,"op":"slice","inputs":[0],"attrs":{"axis":1,
      "start":{"dim":"seq","offset":-1},"limit":{"dim":"seq","offset":0}},
      "dtype":"fp32","shape":[1,1,8],"aten":"aten.select.int","module":""})");
  const Program p = read_program_file(path);
  EXPECT_EQ(p.dim_names, std::vector<std::string>{"seq"});
  const Event& e = p.events[1];
  EXPECT_EQ(*e.node.int_attr("start"), 4);
  EXPECT_EQ(*e.node.int_attr("limit"), 5);
  ASSERT_EQ(e.relative.size(), 2u);
}

TEST(ProgramReader, BadProgramsNameTheEvent) {
  EXPECT_NE(error_of(R"({"ev":"oops"})").find("events[0].ev: unknown event \"oops\""),
            std::string::npos);
  EXPECT_NE(error_of(R"({"ev":"read","id":3,"reason":"item"})")
                .find("events[0] (read): id 3 is used before it is defined"),
            std::string::npos);
  EXPECT_NE(
      error_of(std::string(kInput) + "," + kInput).find("events[1] (input): id 0 is defined twice"),
      std::string::npos);
  const std::string mm = std::string(kInput) + "," + kWeight +
                         R"(, {"ev":"op","id":2,"op":"matmul","inputs":[0,1],"attrs":{},
      "dtype":"fp32","shape":[4,4],"aten":"aten.mm.default","module":"fc"})";
  EXPECT_NE(error_of(mm).find("events[2] (op matmul): the graph op's inferred type "
                              "fp32[4, 3] disagrees with the captured fp32[4, 4]"),
            std::string::npos)
      << error_of(mm);
  const std::string freed = std::string(kInput) + R"(, {"ev":"free","id":0},
      {"ev":"read","id":0,"reason":"item"})";
  EXPECT_NE(error_of(freed).find("events[2] (read): id 0 is used after it was freed"),
            std::string::npos);
  const std::string typo = std::string(kInput) + R"(, {"ev":"op","id":1,"op":"scale",
      "inputs":[0],"attrs":{"vlaue":2},"dtype":"fp32","shape":[4,8],"aten":"aten.mul","module":""})";
  EXPECT_NE(error_of(typo).find("events[1] (op scale): attrs.vlaue: unknown key"),
            std::string::npos)
      << error_of(typo);
  EXPECT_NE(error_of(std::string(kInput) + R"(, {"ev":"op","id":1,"op":"nosuch","inputs":[0],
      "attrs":{},"dtype":"fp32","shape":[4,8],"aten":"a","module":""})")
                .find("events[1] (op nosuch): "),
            std::string::npos);
  EXPECT_NE(error_of(R"({"ev":"host_op","aten":"aten.foo","module":"m","inputs":[],
      "outputs":[{"id":1,"dtype":"fp32","shape":[2]}]})")
                .find("events[0] (host_op): needs \"flops\" and \"bytes\""),
            std::string::npos);
}

// Issue 40: the set-up section is read first, its events before every step's; steps may use
// its values, never free them; it may use nothing the steps make and holds no step boundary.
TEST(ProgramReader, SetUpSectionComesFirstAndItsValuesOutliveEveryStep) {
  const std::string setup =
      std::string(R"(, "setup": [)") + kInput + R"(, {"ev":"op","id":5,"op":"scale","inputs":[0],
      "attrs":{"value":2},"dtype":"fp32","shape":[4,8],"aten":"aten.mul.Tensor","module":""},
      {"ev":"free","id":0}, {"ev":"read","id":5,"reason":"tolist"}])";
  const std::string path = write_program(
      "setup", std::string(kWeight) + R"(, {"ev":"op","id":2,"op":"matmul","inputs":[5,1],
      "attrs":{},"dtype":"fp32","shape":[4,3],"aten":"aten.mm.default","module":"fc"},
      {"ev":"read","id":2,"reason":"item"}, {"ev":"step"}, {"ev":"read","id":5,"reason":"item"})",
      setup);
  const Program p = read_program_file(path);
  EXPECT_EQ(p.setup, 4u);
  ASSERT_EQ(p.events.size(), 9u);
  EXPECT_EQ(p.events[1].node.op, compiler_stub::OpKind::scale);
  ASSERT_EQ(p.steps.size(), 2u);
  EXPECT_EQ(p.steps[0], std::make_pair(size_t{4}, size_t{7}));
  EXPECT_EQ(p.steps[1], std::make_pair(size_t{8}, size_t{9}));
  EXPECT_EQ(p.events[3].read_index, 0);  // reads count from the set-up's
  EXPECT_EQ(p.events[6].read_index, 1);
  EXPECT_EQ(event_place(p, p.events[3]), "setup[3]");
  EXPECT_EQ(event_place(p, p.events[6]), "events[2]");

  // A set-up event using a step's value, a step freeing a set-up value, a step boundary in it.
  const std::string uses = error_of(std::string(kInput) + "," + kWeight,
                                    R"(, "setup": [{"ev":"read","id":0,"reason":"item"}])");
  EXPECT_NE(uses.find("setup[0] (read): id 0 is not made by the set-up section (set-up events use "
                      "only set-up values)"),
            std::string::npos)
      << uses;
  const std::string frees =
      error_of(R"({"ev":"free","id":0})", std::string(R"(, "setup": [)") + kInput + "]");
  EXPECT_NE(frees.find("events[0] (free): id 0 is a set-up value, which stays live for every "
                       "step: no step frees it"),
            std::string::npos)
      << frees;
  const std::string step = error_of(kInput, R"(, "setup": [{"ev":"step"}])");
  EXPECT_NE(step.find("setup[0] (step): a step boundary in the set-up section"), std::string::npos)
      << step;
  // An event error names its place in the set-up.
  EXPECT_NE(error_of(kInput, R"(, "setup": [{"ev":"op","id":1,"op":"relu","inputs":[],
      "attrs":{},"dtype":"fp32","shape":[4],"aten":"aten.relu.default","module":""}])")
                .find("setup[0] (op relu): "),
            std::string::npos);
  EXPECT_NE(error_of(kInput, R"(, "setup": {})").find("setup: expected an array"),
            std::string::npos)
      << error_of(kInput, R"(, "setup": {})");
}

TEST(ProgramReader, AMissingValuesFileIsAnError) {
  // The values folder is relative to the program file (written in the test temp dir).
  const std::string name = "vals_" + std::to_string(::getpid());
  std::filesystem::create_directories(::testing::TempDir() + "/" + name);
  const std::string err = error_of(kInput, ", \"values\": \"" + name + "\"");
  EXPECT_NE(err.find("events[0] (input): missing values file "), std::string::npos) << err;
  EXPECT_NE(err.find(name + "/i0.npy"), std::string::npos) << err;
  EXPECT_NE(error_of(kInput, ", \"values\": \"nonexistent/dir\"").find("values: no directory"),
            std::string::npos);
}

// Issue 40: a values folder anywhere on disk was read; it must lie inside the program's folder.
TEST(ProgramReader, AValuesFolderOutsideTheProgramsFolderIsRefused) {
  for (const std::string v : {"/tmp", "..", "../x", "a/../../x", ""}) {
    EXPECT_NE(error_of(kInput, ", \"values\": \"" + v + "\"")
                  .find("is not a folder inside the program file's folder"),
              std::string::npos)
        << v;
  }
}

}  // namespace
}  // namespace wallsim::torch
