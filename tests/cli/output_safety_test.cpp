// Issue 40 regressions: outputs never delete or replace what wallsim did not write (a folder with
// a stats.json of the user's, a FIFO, a device node).
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
  if (targets.size() > 1) EXPECT_TRUE(fs::is_character_file(fs::symlink_status(d + "/dev")));
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

}  // namespace
}  // namespace wallsim::test
