// The wallsim command as a user meets it: exit codes, one-line errors, outputs.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Result {
  int code;
  std::string out;
  std::string err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs `wallsim ARGS` from the source tree and captures exit code, stdout and stderr.
Result run(const std::string& args) {
  static int counter = 0;
  std::string base =
      ::testing::TempDir() + "/cli_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
  std::string cmd = std::string("cd ") + WALLSIM_SOURCE_DIR + " && " + WALLSIM_BIN + " " + args +
                    " >" + base + ".out 2>" + base + ".err";
  int status = std::system(cmd.c_str());
  Result r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(base + ".out"),
           slurp(base + ".err")};
  std::remove((base + ".out").c_str());
  std::remove((base + ".err").c_str());
  return r;
}

std::string write_temp(const std::string& name, const std::string& content) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << content;
  return path;
}

int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(Cli, ValidateShippedConfigs) {
  Result r = run("config validate configs/trn1.json configs/trn2.json configs/tiny.json");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "configs/trn1.json: ok\nconfigs/trn2.json: ok\nconfigs/tiny.json: ok\n");
}

TEST(Cli, BadConfigIsOneLineAndExitCode2) {
  std::string bad = write_temp("cli_bad.json", R"({"arch": {"sbuf": {"partitions": "128x"}}})");
  Result r = run("config validate " + bad);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "wallsim: " + bad +
                       ": arch.sbuf.partitions: expected an integer in [1, 1024], got \"128x\"\n");

  r = run("config dump --config " + bad);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(Cli, SetOverridesAndTheirErrors) {
  Result r = run("config dump --config configs/trn2.json --set arch.sbuf.partitions=64");
  EXPECT_EQ(r.code, 2);  // 64 partitions cannot feed a 128-row array
  EXPECT_NE(r.err.find("arch.tensor.rows: array rows (128) exceed SBUF partitions (64)"),
            std::string::npos)
      << r.err;
  r =
      run("config dump --config configs/trn2.json --set arch.tensor.rows=64 --set "
          "arch.sbuf.partitions=64");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"partitions\": 64"), std::string::npos);
  r = run("config dump --config configs/trn2.json --set arch.sbuf.partitons=64");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "wallsim: --set arch.sbuf.partitons=64: arch.sbuf.partitons: unknown key (did you "
            "mean \"partitions\"?)\n");
}

TEST(Cli, SchemaIsJson) {
  Result r = run("config schema");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("\"$schema\""), std::string::npos);
  EXPECT_NE(r.out.find("\"moving_free_max\""), std::string::npos);
}

TEST(Cli, SummaryDerivesPeakFromTheConfig) {
  Result r = run("config summary --config configs/trn1.json");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("peak 91.8 TFLOP/s bf16"), std::string::npos) << r.out;
}

TEST(Cli, PlanCheckAndDisasm) {
  for (const char* p : {"matmul", "vector_add", "softmax", "gather"}) {
    std::string plan = std::string("examples/plans/") + p + ".json";
    Result r = run("plan check " + plan + " --config configs/trn2.json");
    EXPECT_EQ(r.code, 0) << r.err;
    r = run("plan disasm " + plan);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_GT(lines(r.out), 3);
  }
}

TEST(Cli, PlanCheckReportsEachViolationAndExits2) {
  // The example plans use 128 partitions; tiny has 32.
  Result r = run("plan check examples/plans/vector_add.json --config configs/tiny.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("[decl] buffer x_sb covers partitions 0..128 but sbuf has 32"),
            std::string::npos)
      << r.err;
}

TEST(Cli, CorruptPlanFileIsOneLineAndExitCode2) {
  std::string text = slurp(std::string(WALLSIM_SOURCE_DIR) + "/examples/plans/softmax.json");
  for (size_t cut : {size_t{0}, size_t{1}, text.size() / 3, text.size() - 2}) {
    std::string path = write_temp("cli_cut.json", text.substr(0, cut));
    for (const std::string& cmd :
         {"plan disasm " + path, "plan check " + path + " -c configs/trn2.json"}) {
      Result r = run(cmd);
      EXPECT_EQ(r.code, 2) << cmd;
      EXPECT_EQ(lines(r.err), 1) << r.err;
      EXPECT_EQ(r.err.rfind("wallsim: " + path + ": ", 0), 0u) << r.err;
    }
  }
  Result r = run("plan disasm /nonexistent/plan.json");
  EXPECT_EQ(r.code, 2);
}

TEST(Cli, PlanFormatIsIdempotent) {
  std::string out = ::testing::TempDir() + "/cli_formatted.json";
  Result r = run("plan format examples/plans/matmul.json --out " + out);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(out), slurp(std::string(WALLSIM_SOURCE_DIR) + "/examples/plans/matmul.json"));
}

TEST(Cli, UsageErrorsExit2) {
  EXPECT_EQ(run("").code, 2);
  EXPECT_EQ(run("frobnicate").code, 2);
  EXPECT_EQ(run("config dump").code, 2);  // --config is required
  Result r = run("config validate");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_EQ(run("--help").code, 0);
}

TEST(Cli, UnknownStudyIsNamedWithTheKnownOnes) {
  Result r = run("study nosuch");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("unknown study 'nosuch'"), std::string::npos) << r.err;
  for (const char* known : {"wall", "decode", "serving", "mask", "granularity", "fallback"})
    EXPECT_NE(r.err.find(known), std::string::npos) << known << ": " << r.err;
  EXPECT_EQ(r.err.find("A subcommand is required"), std::string::npos) << r.err;
  r = run("study");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("a study name is required (known: "), std::string::npos) << r.err;
  r = run("frobnicate");
  EXPECT_NE(r.err.find("unknown command 'frobnicate' (known: config,"), std::string::npos) << r.err;
}

TEST(Cli, HelpShowsDefaults) {
  Result r = run("run --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("=fused"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("=plans"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--out TEXT=out/run"), std::string::npos) << r.out;
  r = run("study decode --help");
  EXPECT_NE(r.out.find("--spec TEXT=configs/studies/decode.json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("=2"), std::string::npos) << r.out;  // --jobs
  for (const char* args : {"run --help", "exec --help", "sweep --help", "study wall --help"}) {
    r = run(args);
    EXPECT_EQ(r.out.find("=[]"), std::string::npos) << args << ": " << r.out;  // no empty lists
    EXPECT_EQ(r.out.find("=-1"), std::string::npos) << args << ": " << r.out;  // nor "not given"
  }
}

// Every CLI11 parse error, and a bad --trace-window, is one `wallsim: ...` line with exit 2.
TEST(Cli, ParseErrorsAreOneWallsimLine) {
  for (const char* args :
       {"run -c configs/tiny.json -w gemm --trace-window abc",
        "run -c configs/tiny.json -w gemm --trace-window 5:1",
        "run -c configs/tiny.json -w gemm --trace-window", "run -c configs/tiny.json --steps x",
        "run -c configs/tiny.json --mode zz", "run -c configs/tiny.json --bogus",
        "run -c configs/tiny.json a b", "exec", "study wall --jobs 2"}) {
    Result r = run(args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_EQ(lines(r.err), 1) << args << ": " << r.err;
    EXPECT_EQ(r.err.rfind("wallsim: ", 0), 0u) << args << ": " << r.err;
  }
}

// README's sample session under "The `wallsim` command" is what the commands print: each `$ `
// line is run from the source tree and its output compared line by line (exec's real seconds and
// output directory aside).
TEST(Cli, ReadmeSampleSessionIsCurrent) {
  const std::string readme = slurp(std::string(WALLSIM_SOURCE_DIR) + "/README.md");
  const size_t begin = readme.find("```\n$ build/bin/wallsim config summary");
  ASSERT_NE(begin, std::string::npos);
  const size_t end = readme.find("```", begin + 3);
  std::istringstream in(readme.substr(begin + 4, end - begin - 4));
  std::vector<std::pair<std::string, std::string>> commands;  // command, expected output
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("$ build/bin/wallsim ", 0) == 0) {
      commands.push_back({line.substr(20), ""});
    } else if (!commands.empty()) {
      commands.back().second += line + "\n";
    }
  }
  ASSERT_EQ(commands.size(), 3u);
  for (auto& [command, expected] : commands) {
    std::string args = command;
    const size_t out = args.find(" --out ");
    const bool exec = out != std::string::npos;
    // A folder of this process's: another process's (an older build's, without the
    // .wallsim-output marker) would be refused.
    const std::string dir = ::testing::TempDir() + "/readme_exec_" + std::to_string(::getpid());
    if (exec) args = args.substr(0, out) + " --out " + dir;
    Result r = run(args);
    ASSERT_EQ(r.code, 0) << command << r.err;
    if (exec) {  // "<dir>: <figures> simulated in <real seconds> s"
      const auto figures = [](const std::string& s) {
        return s.substr(s.find(": "), s.find(" in ") - s.find(": "));
      };
      EXPECT_EQ(figures(r.out), figures(expected)) << command;
      std::filesystem::remove_all(dir);
    } else {
      EXPECT_EQ(r.out, expected) << command;
    }
  }
}

}  // namespace
