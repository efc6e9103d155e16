// `wallsim import onnx MODEL.onnx --out G.json [--weights] [--dim NAME=N ...]`: an ONNX model as
// a graph file; with --weights, the initializers' values as <name>.npy in G.weights/ beside it.
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "wallsim/base/file_write.h"
#include "wallsim/compiler_stub/graph_io.h"
#include "wallsim/frontends/onnx.h"
#include "wallsim/sim/exec.h"
#include "wallsim/traces/run_directory.h"

namespace wallsim::cli {

// The directory beside graph file `graph` that holds its weights: G.json -> G.weights.
std::string weights_dir_of(const std::string& graph) {
  std::filesystem::path p(graph);
  return (p.parent_path() / (p.stem().string() + ".weights")).string();
}

void add_import_command(CLI::App& app) {
  struct Args {
    std::string model, out;
    bool weights = false;
    std::vector<std::string> dims;
  };
  auto a = std::make_shared<Args>();
  CLI::App* imp =
      app.add_subcommand("import", "convert a model from another framework to a graph file");
  imp->require_subcommand(1);
  CLI::App* cmd =
      imp->add_subcommand("onnx", "an ONNX model (ai.onnx opsets 1-17) to a graph file");
  cmd->add_option("model", a->model, "model file (.onnx)")->required();
  cmd->add_option("--out,-o", a->out, "graph file to write (JSON)")->required();
  cmd->add_flag("--weights", a->weights,
                "also write each weight's values as <name>.npy in G.weights/ beside G.json");
  cmd->add_option("--dim", a->dims, "bind a symbolic input dim: NAME=N (repeatable)");
  cmd->callback([a] {
    frontends::onnx::ImportOptions o;
    for (const std::string& d : a->dims) {
      const size_t eq = d.find('=');
      int64_t n = 0;
      try {
        if (eq == std::string::npos) throw std::invalid_argument(d);
        size_t used = 0;
        n = std::stoll(d.substr(eq + 1), &used);
        if (used != d.size() - eq - 1 || n < 1) throw std::invalid_argument(d);
      } catch (const std::exception&) {
        throw base::InputError("--dim " + d, "expected NAME=N with N >= 1");
      }
      o.dims[d.substr(0, eq)] = n;
    }
    // Both outputs are checked before any is written: a G.weights that is a file, or a G.json
    // that is a folder or a FIFO, leaves neither written.
    base::check_output_file(a->out);
    const std::string dir = a->weights ? weights_dir_of(a->out) : "";
    std::error_code ec;
    if (!dir.empty() && std::filesystem::exists(dir, ec) &&
        !std::filesystem::is_directory(dir, ec)) {
      throw base::InputError(dir,
                             "exists and is not a folder; refusing to replace it (--weights "
                             "writes the weights there)");
    }
    // G.weights is a run directory: written in a staging folder beside it and renamed into
    // place whole, replacing only an earlier import's (its .wallsim-output marker), never a
    // folder of the user's; a failed write (a full disk) leaves nothing behind.
    std::unique_ptr<traces::RunDirectory> weights;
    if (!dir.empty()) weights = sim::open_run_directory(dir);
    frontends::onnx::Imported m = frontends::onnx::import_file(a->model, o);
    std::string where;
    if (weights) {
      const std::string staging =
          std::filesystem::path(weights->file(traces::kRunDirectoryMarker)).parent_path().string();
      frontends::onnx::write_weights(m, staging);
      where = " (values in " + dir + ")";
    }
    compiler_stub::write_graph_file(m.graph, a->out);
    if (weights) weights->commit();
    int64_t inputs = 0;
    for (const auto& n : m.graph.nodes) inputs += n.op == compiler_stub::OpKind::input;
    std::cout << a->out << ": " << m.graph.nodes.size() - inputs << " ops, " << m.inputs.size()
              << " input(s), " << m.weights.size() << " weight(s)" << where << ", "
              << m.graph.outputs.size() << " output(s); ai.onnx opset " << m.opset << "\n";
  });
}

}  // namespace wallsim::cli
