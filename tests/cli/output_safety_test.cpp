// Issue 40 regressions: outputs never delete or replace what wallsim did not write (a folder with
// a stats.json of the user's, a FIFO, a device node), and a full disk, an address-space limit or
// an unwritable sweep folder is one line with exit code 2.
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace wallsim::test {
namespace {

namespace fs = std::filesystem;

int lines_of(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

// `wallsim ARGS` run by sh after `limits` (shell commands: ulimit, trap); stderr into `err`.
int run_limited(const std::string& limits, const std::string& args, std::string* err) {
  const std::string errfile = ::testing::TempDir() + "/wallsim_err_" + std::to_string(::getpid());
  const std::string cmd = std::string("cd ") + WALLSIM_SOURCE_DIR + " && (" + limits + "; exec " +
                          WALLSIM_BIN + " " + args + ") >/dev/null 2>" + errfile;
  const int status = std::system(cmd.c_str());
  *err = slurp(errfile);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool is_fifo(const std::string& p) { return fs::is_fifo(fs::symlink_status(p)); }

// `run --out D` deleted any folder holding a file named stats.json; an earlier wallsim output is
// now told by the marker wallsim writes in each run directory.
TEST(OutputSafety, RunOutReplacesOnlyAFolderWallsimWrote) {
  const std::string d = fresh_dir("os", "user");
  fs::create_directories(d);
  std::ofstream(d + "/stats.json") << "x";
  std::ofstream(d + "/thesis.tex") << "keep";
  const std::string run =
      "run -c configs/tiny.json -w gemm:m=64,k=64,n=64 --steps 1 "
      "--trace-level none --out ";
  std::string err;
  EXPECT_EQ(run_wallsim(run + d, &err), 2);
  EXPECT_NE(err.find("not an earlier wallsim output"), std::string::npos) << err;
  EXPECT_EQ(lines_of(err), 1) << err;
  EXPECT_EQ(slurp(d + "/thesis.tex"), "keep");
  // A run's own folder is replaced by the next run: it holds the marker.
  const std::string own = fresh_dir("os", "own");
  ASSERT_EQ(run_wallsim(run + own, &err), 0) << err;
  EXPECT_TRUE(fs::is_regular_file(own + "/.wallsim-output"));
  ASSERT_EQ(run_wallsim(run + own, &err), 0) << err;
  EXPECT_TRUE(fs::exists(own + "/stats.json"));
}

// `study wall` could not rerun into its own output folder (it holds no stats.json).
TEST(OutputSafety, StudyWallRerunsIntoItsOwnFolder) {
  const std::string out = fresh_dir("os", "wall"), spec = out + ".spec.json";
  std::ofstream(spec) << R"({"workloads": ["gemm:m=64,k=64,n=64"], "modes": ["native"],
    "profiles": ["neuron"], "steps": 2})";
  const std::string cmd = "study wall -c configs/tiny.json --spec " + spec + " --out " + out;
  std::string err;
  ASSERT_EQ(run_wallsim(cmd, &err), 0) << err;
  ASSERT_EQ(run_wallsim(cmd, &err), 0) << err;
  EXPECT_TRUE(fs::exists(out + "/wall.md"));
  EXPECT_TRUE(fs::exists(out + "/.wallsim-output"));
  fs::remove(spec);
}

// Outputs overwrote FIFOs and device nodes: each writer refuses anything that is not a regular
// file or absent. The device node is made here (a copy of /dev/null's numbers, harmless to
// write); where mknod is not allowed only the FIFO is tried.
TEST(OutputSafety, FileOutputsRefuseFifosAndDeviceNodes) {
  const std::string d = fresh_dir("os", "special");
  fs::create_directories(d);
  std::vector<std::string> targets = {d + "/fifo"};
  ASSERT_EQ(mkfifo(targets[0].c_str(), 0644), 0);
  if (mknod((d + "/dev").c_str(), S_IFCHR | 0644, makedev(1, 3)) == 0)
    targets.push_back(d + "/dev");
  std::string err;
  ASSERT_EQ(run_wallsim("sweep configs/sweeps/smoke.json --index 0 --out " + d + "/sw", &err), 0)
      << err;
  for (const std::string& t : targets) {
    for (const std::string& cmd :
         {"import onnx tests/bad_input/files/onnx_relu.onnx --out " + t,
          "compile examples/graphs/mlp.json -c configs/tiny.json -o " + t,
          "plan format examples/plans/vector_add.json -o " + t, "collect " + d + "/sw --csv " + t,
          "run -c configs/tiny.json -w gemm:m=64,k=64,n=64 --out " + t}) {
      EXPECT_EQ(run_wallsim(cmd, &err), 2) << cmd;
      EXPECT_EQ(lines_of(err), 1) << err;
      EXPECT_NE(err.find(t), std::string::npos) << err;
    }
  }
  EXPECT_TRUE(is_fifo(d + "/fifo"));
  if (targets.size() > 1) {
    EXPECT_TRUE(fs::is_character_file(fs::symlink_status(d + "/dev")));
  }
  for (const auto& e : fs::directory_iterator(d)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
}

// `import onnx --weights` where G.weights is a file was an internal error after G.json was written.
TEST(OutputSafety, ImportWeightsIntoAFileWritesNothing) {
  const std::string d = fresh_dir("os", "weights");
  fs::create_directories(d);
  std::ofstream(d + "/g.weights") << "keep";
  std::string err;
  EXPECT_EQ(run_wallsim(
                "import onnx tests/bad_input/files/onnx_relu.onnx --weights --out " + d + "/g.json",
                &err),
            2);
  EXPECT_NE(err.find("g.weights: exists and is not a folder"), std::string::npos) << err;
  EXPECT_EQ(lines_of(err), 1) << err;
  EXPECT_FALSE(fs::exists(d + "/g.json"));
  EXPECT_EQ(slurp(d + "/g.weights"), "keep");
}

// A full disk (here a file size limit, which fails writes the same way) while writing the trace:
// one line and exit 2, not "writing trace file ... failed" (exit 1) or SystemC's three-line E549,
// and an earlier run in the target stays as it was.
TEST(OutputSafety, FullDiskWhileTracingIsOneLineAndKeepsTheEarlierRun) {
  if (WALLSIM_TEST_ASAN)
    GTEST_SKIP() << "a ulimit run under AddressSanitizer (shadow map, stderr notes)";
  const std::string d = fresh_dir("os", "full");
  const std::string run =
      "run -c configs/tiny.json -w mlp:batch=64,d_model=64,d_ff=128,layers=2 "
      "--steps 2 --out " +
      d + " --trace-level ";
  std::string err;
  ASSERT_EQ(run_wallsim(run + "none", &err), 0) << err;
  const std::string before = slurp(d + "/stats.json");
  // 64 blocks at most per file (the trace needs more); SIGXFSZ ignored, so the write past the
  // limit fails with EFBIG.
  EXPECT_EQ(run_limited("ulimit -f 64; trap '' XFSZ", run + "instructions", &err), 2);
  EXPECT_EQ(lines_of(err), 1) << err;
  EXPECT_NE(err.find("trace.json: cannot write file (File too large)"), std::string::npos) << err;
  EXPECT_EQ(slurp(d + "/stats.json"), before);
  const std::string staging = "." + fs::path(d).filename().string() + ".partial-";
  for (const auto& e : fs::directory_iterator(fs::path(d).parent_path())) {
    EXPECT_NE(e.path().filename().string().rfind(staging, 0), 0u) << e.path();
  }
}

// The run directory's stats files are written checked: a write that fails (here past a 2-block
// file size limit) is one line naming stats.json, exit 2, and no folder appears.
TEST(OutputSafety, FullDiskWhileWritingStatsIsOneLine) {
  if (WALLSIM_TEST_ASAN)
    GTEST_SKIP() << "a ulimit run under AddressSanitizer (shadow map, stderr notes)";
  const std::string d = fresh_dir("os", "stats");
  std::string err;
  EXPECT_EQ(run_limited("ulimit -f 2; trap '' XFSZ",
                        "exec examples/plans/matmul.json -c configs/trn2.json --trace-level none "
                        "--out " +
                            d,
                        &err),
            2);
  EXPECT_EQ(lines_of(err), 1) << err;
  EXPECT_NE(err.find("stats.json: cannot write file (File too large)"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(d + "/stats.json"));
}

// `ulimit -v`: the host-memory estimate counts the address-space limit (refused before any
// work), and a bad_alloc that escapes anyway is "out of host memory" with the figures, exit 2.
TEST(OutputSafety, AddressSpaceLimitIsOneLineWithExit2) {
  if (WALLSIM_TEST_ASAN)
    GTEST_SKIP() << "a ulimit run under AddressSanitizer (shadow map, stderr notes)";
  const std::string d = fresh_dir("os", "as");
  std::string err;
  EXPECT_EQ(run_limited("ulimit -v 1500000",
                        "run -c configs/trn2.json -w gemm:m=524288,k=4096,n=4096 --mode native "
                        "--steps 1 --trace-level none --out " +
                            d,
                        &err),
            2)
      << err;
  EXPECT_NE(err.find("of host memory but"), std::string::npos) << err;
  EXPECT_EQ(lines_of(err), 1) << err;
  // A program's host op with a 2^39-element output, replayed with values: the allocation fails.
  EXPECT_EQ(run_limited("ulimit -v 4000000",
                        "run -c configs/trn2.json --functional --trace-level none "
                        "-w program:file=tests/bad_input/files/program_host_op_huge.json --out " +
                            d,
                        &err),
            2)
      << err;
  EXPECT_EQ(err.rfind("wallsim: out of host memory: an allocation failed (", 0), 0u) << err;
  EXPECT_NE(err.find("(ulimit -v)"), std::string::npos) << err;
  EXPECT_EQ(lines_of(err), 1) << err;
  EXPECT_FALSE(fs::exists(d));
}

// `sweep` appended through a results.jsonl symlink, and was exit 1 when results.jsonl was a
// folder or --out could not be created.
TEST(OutputSafety, SweepResultsMustBeARegularFile) {
  const std::string d = fresh_dir("os", "sweep");
  fs::create_directories(d);
  std::ofstream(d + "/elsewhere.txt") << "keep\n";
  std::string err;
  for (const std::string kind : {"symlink", "folder"}) {
    const std::string out = d + "/" + kind;
    fs::create_directories(out);
    if (std::string(kind) == "symlink") {
      fs::create_symlink(d + "/elsewhere.txt", out + "/results.jsonl");
    } else {
      fs::create_directories(out + "/results.jsonl");
    }
    EXPECT_EQ(run_wallsim("sweep configs/sweeps/smoke.json --out " + out, &err), 2) << kind;
    EXPECT_NE(err.find("refusing to append to it"), std::string::npos) << err;
    EXPECT_EQ(lines_of(err), 1) << err;
    EXPECT_FALSE(fs::exists(out + "/points")) << kind;
  }
  EXPECT_EQ(slurp(d + "/elsewhere.txt"), "keep\n");
}

// `collect` turned a forged line with index 1e300 and id ../../.. into one row too many.
TEST(OutputSafety, CollectSkipsLinesThatAreNotResults) {
  const std::string d = fresh_dir("os", "collect");
  std::string err;
  ASSERT_EQ(run_wallsim("sweep configs/sweeps/smoke.json --index 0 --out " + d, &err), 0) << err;
  ASSERT_EQ(run_wallsim("collect " + d + " --csv " + d + "/a.csv", &err), 0) << err;
  std::ofstream(d + "/results.jsonl", std::ios::app)
      << R"({"id":"../../..","status":"ok","index":1e300})"
      << "\n"
      << R"({"id":"0123456789abcdef","status":"ok","index":1e300})"
      << "\n"
      << R"({"id":"0123456789abcdef","status":"ok","index":-1})"
      << "\n";
  ASSERT_EQ(run_wallsim("collect " + d + " --csv " + d + "/b.csv", &err), 0) << err;
  EXPECT_EQ(slurp(d + "/b.csv"), slurp(d + "/a.csv"));
}

}  // namespace
}  // namespace wallsim::test
