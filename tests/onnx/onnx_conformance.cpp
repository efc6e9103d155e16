// ONNX's backend tests as a conformance suite. For each test directory (model.onnx and
// test_data_set_0/{input,output}_*.pb) of a shard: import the model, check the reference
// evaluator against the expected outputs (ONNX's default tolerance, rtol 1e-3, atol 1e-7), then
// compile the graph whole for each chip config and run it functionally in a child process (one
// SystemC elaboration per process), checking the device's outputs (rtol 1e-3, atol 1e-5).
// A test the importer or the lowering cannot take is skipped with its reason; a wrong value is a
// failure. Writes one JSON line per test to --results; exits 1 when any test failed.
//
//   onnx_conformance --data DIR --suite node --shard K/N --configs trn2,tiny --results FILE
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "wallsim/compiler_stub/compile.h"
#include "wallsim/compiler_stub/lower.h"
#include "wallsim/compiler_stub/reference.h"
#include "wallsim/frontends/onnx.h"
#include "wallsim/memory/npy.h"
#include "wallsim/runtime/config.h"
#include "wallsim/sim/exec.h"
#include "wallsim/sim/simulate.h"
#include "wallsim/sim/system.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace wallsim;
namespace cs = compiler_stub;
namespace onnx = frontends::onnx;

namespace {

struct Tolerance {
  double rtol, atol;
};
constexpr Tolerance kReference{1e-3, 1e-7};
constexpr Tolerance kChip{1e-3, 1e-5};

// "" when `got` matches `want` elementwise within `tol`, else the first mismatch.
std::string compare(const std::vector<float>& got, const cs::HostTensor& want, Tolerance tol) {
  if (got.size() != want.data.size()) {
    return std::to_string(got.size()) + " values, expected " + std::to_string(want.data.size());
  }
  int64_t bad = 0;
  std::string first;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want.data[i];
    const bool same_nan = std::isnan(g) && std::isnan(w);
    const bool same_inf = std::isinf(g) && g == w;
    if (same_nan || same_inf || std::fabs(g - w) <= tol.atol + tol.rtol * std::fabs(w)) continue;
    if (!bad++) {
      std::ostringstream s;
      s << "element " << i << " is " << g << ", expected " << w;
      first = s.str();
    }
  }
  if (!bad) return "";
  return first + " (" + std::to_string(bad) + " of " + std::to_string(got.size()) + " differ)";
}

struct Case {
  std::string name, dir;
  onnx::Imported model;
  std::map<std::string, cs::HostTensor> inputs;  // by graph input name, weights included
  std::vector<cs::HostTensor> expected;          // by graph output
  bool bound_constants = false;                  // integer inputs imported as constants
};

// Loads a test; "" or the reason it is skipped.
// A model whose shape inputs (Reshape's shape, Slice's starts, ...) are graph inputs is imported
// again with its integer inputs bound to the test's values, as constants.
std::string load(Case& c) {
  const std::string data = c.dir + "/test_data_set_0";
  if (!fs::exists(data)) return "no test_data_set_0";
  std::vector<std::string> onnx_inputs;  // the model's non-initializer inputs, in order
  try {
    c.model = onnx::import_file(c.dir + "/model.onnx");
  } catch (const base::InputError& e) {
    std::string why = e.what();
    const std::string p = c.dir + "/model.onnx: ";
    if (why.rfind(p, 0) == 0) why = why.substr(p.size());
    if (why.find("must be a constant") == std::string::npos) return "import: " + why;
    onnx::ImportOptions o;
    for (int i = 0; fs::exists(data + "/input_" + std::to_string(i) + ".pb"); ++i) {
      std::string dtype;
      onnx::read_tensor_file(data + "/input_" + std::to_string(i) + ".pb", &dtype);
      if (dtype == "int64" || dtype == "int32") {
        o.constant_files[onnx::input_names(c.dir + "/model.onnx").at(i)] =
            data + "/input_" + std::to_string(i) + ".pb";
      }
    }
    try {
      c.model = onnx::import_file(c.dir + "/model.onnx", o);
      c.bound_constants = true;
    } catch (const base::InputError& e2) {
      return "import: " + why;
    }
  }
  c.inputs = c.model.weights;
  const std::vector<std::string> names = onnx::input_names(c.dir + "/model.onnx");
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = std::find_if(c.model.inputs.begin(), c.model.inputs.end(),
                           [&](const auto& p) { return p.first == names[i]; });
    if (it == c.model.inputs.end()) continue;  // bound as a constant
    std::string dtype;
    cs::HostTensor t = onnx::read_tensor_file(data + "/input_" + std::to_string(i) + ".pb", &dtype);
    if (dtype != "float" && dtype != "int64" && dtype != "int32") return "dtype: input " + dtype;
    if (t.shape.empty()) t.shape = {1};
    c.inputs[it->second] = std::move(t);
  }
  for (size_t i = 0; i < c.model.outputs.size(); ++i) {
    std::string dtype;
    c.expected.push_back(
        onnx::read_tensor_file(data + "/output_" + std::to_string(i) + ".pb", &dtype));
    if (dtype != "float") return "dtype: output " + dtype;
  }
  return "";
}

// Input tensors as given, shaped like the graph's declarations.
std::string check_reference(Case& c) {
  std::map<int32_t, cs::HostTensor> values;
  try {
    values = cs::evaluate(c.model.graph, c.inputs, {});
  } catch (const base::InputError& e) {
    return std::string("reference: ") + e.what();
  }
  for (size_t i = 0; i < c.expected.size(); ++i) {
    std::string why = compare(values.at(c.model.graph.outputs[i]).data, c.expected[i], kReference);
    if (!why.empty()) return "output " + std::to_string(i) + ": " + why;
  }
  return "";
}

void put_values(memory::TensorStore::Tensor& t, const cs::HostTensor& h) {
  memory::NpyArray a;
  a.shape = t.shape;
  if (t.dtype == isa::DType::int32) {
    a.descr = "<i4";
    for (float v : h.data) {
      const int32_t x = static_cast<int32_t>(v);
      const auto* b = reinterpret_cast<const uint8_t*>(&x);
      a.data.insert(a.data.end(), b, b + 4);
    }
  } else {
    a.descr = "<f4";
    const auto* b = reinterpret_cast<const uint8_t*>(h.data.data());
    a.data.assign(b, b + 4 * h.data.size());
  }
  memory::load_npy_into(a, t, "input");
}

// In a child process: {"status": pass|fail|skip, "reason": ...}.
json run_chip(const Case& c, const std::string& config_dir, const std::string& config) {
  runtime::Config cfg = runtime::load_config(config_dir + "/" + config + ".json");
  auto compiled =
      cs::compile_graph(c.model.graph, cfg.chip.arch, cs::GroupPolicy::whole, {}, cfg.compiler);
  if (auto* err = std::get_if<cs::CompileError>(&compiled)) {
    return {{"status", "skip"}, {"reason", "lowering: " + err->message()}};
  }
  const auto& cg = std::get<cs::CompiledGraph>(compiled);
  sim::init_systemc();
  traces::StatsRegistry stats;
  sim::CoreOptions opts;
  opts.functional = true;
  opts.stats = &stats;
  sim::System system(cfg.chip, opts);
  sim::Core& device = system.core();
  for (const cs::Node& n : c.model.graph.nodes) {
    if (n.op != cs::OpKind::input) continue;
    std::vector<int64_t> shape;
    for (const cs::Dim& d : n.type.dims) shape.push_back(d.size);
    auto& t = device.tensors().put(n.name, isa::MemSpace::hbm, n.type.dtype, shape);
    put_values(t, c.inputs.at(n.name));
  }
  for (const isa::Plan& p : cg.plans.plans) {
    for (const isa::TensorDecl& t : p.tensors) {
      if (!device.tensors().find(t.name)) device.tensors().put(t.name, t.space, t.dtype, t.shape);
    }
    device.launch(p, {});
  }
  wallsim::sim::simulate();
  if (device.error()) return {{"status", "fail"}, {"reason", "device: " + *device.error()}};
  device.finalize();
  for (size_t i = 0; i < c.expected.size(); ++i) {
    const auto* t = device.tensors().find(cs::value_name(c.model.graph, c.model.graph.outputs[i]));
    if (!t) return {{"status", "fail"}, {"reason", "no output tensor"}};
    std::string why = compare(memory::to_floats(*t), c.expected[i], kChip);
    if (!why.empty())
      return {{"status", "fail"}, {"reason", "output " + std::to_string(i) + ": " + why}};
  }
  int64_t instructions = 0;
  for (const isa::Plan& p : cg.plans.plans) instructions += p.instruction_count();
  return {{"status", "pass"}, {"instructions", instructions}};
}

json in_child(const Case& c, const std::string& config_dir, const std::string& config) {
  int fds[2];
  if (pipe(fds) != 0) return {{"status", "fail"}, {"reason", "pipe failed"}};
  std::cout.flush();
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    json r;
    try {
      r = run_chip(c, config_dir, config);
    } catch (const std::exception& e) {
      r = {{"status", "fail"}, {"reason", std::string("error: ") + e.what()}};
    }
    const std::string s = r.dump();
    ssize_t off = 0;
    while (off < ssize_t(s.size())) {
      ssize_t w = write(fds[1], s.data() + off, s.size() - off);
      if (w <= 0) break;
      off += w;
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (out.empty()) {
    return {
        {"status", "fail"},
        {"reason",
         "the run crashed (" +
             std::string(WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "no result") + ")"}};
  }
  return json::parse(out);
}

std::vector<std::string> cfgs_of(const std::string& configs) {
  std::vector<std::string> cfgs;
  for (size_t at = 0; at <= configs.size();) {
    size_t comma = configs.find(',', at);
    if (comma == std::string::npos) comma = configs.size();
    if (comma > at) cfgs.push_back(configs.substr(at, comma - at));
    at = comma + 1;
  }
  return cfgs;
}

// A model without test data (tests/onnx/models): seeded random inputs, the reference evaluator's
// outputs as the expected values, the compiled graph on each chip config checked against them.
int check_model(const std::string& path, const std::vector<std::string>& cfgs,
                const std::string& config_dir) {
  Case c;
  c.name = path;
  c.model = onnx::import_file(path);
  c.inputs = c.model.weights;
  uint32_t state = 22;
  for (const auto& [onnx_name, name] : c.model.inputs) {
    const cs::Node* n = nullptr;
    for (const cs::Node& x : c.model.graph.nodes) {
      if (x.op == cs::OpKind::input && x.name == name) n = &x;
    }
    cs::HostTensor t;
    for (const cs::Dim& d : n->type.dims) t.shape.push_back(d.size);
    int64_t count = 1;
    for (int64_t d : t.shape) count *= d;
    for (int64_t i = 0; i < count; ++i) {
      state = state * 1664525u + 1013904223u;
      t.data.push_back(static_cast<float>(state >> 8) / float(1 << 24) * 2.0f - 1.0f);
    }
    c.inputs[name] = std::move(t);
  }
  auto values = cs::evaluate(c.model.graph, c.inputs, {});
  for (int32_t id : c.model.graph.outputs) c.expected.push_back(values.at(id));
  int failed = 0;
  for (const std::string& cfg : cfgs) {
    json r = in_child(c, config_dir, cfg);
    std::cout << path << " on " << cfg << ": " << r.dump() << "\n";
    failed += r["status"] != "pass";
  }
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, data, suite = "node", shard = "0/1", configs = "trn2,tiny", results, only,
                           config_dir = std::string(WALLSIM_SOURCE_DIR) + "/configs";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--data")
      data = v;
    else if (k == "--suite")
      suite = v;
    else if (k == "--shard")
      shard = v;
    else if (k == "--configs")
      configs = v;
    else if (k == "--results")
      results = v;
    else if (k == "--only")
      only = v;
    else if (k == "--model")
      model = v;
    else {
      std::cerr << "onnx_conformance: unknown option " << k << "\n";
      return 2;
    }
  }
  if (argc == 2 && std::string(argv[1]) == "--list-ops") {
    for (const std::string& op : onnx::supported_ops()) std::cout << op << "\n";
    return 0;
  }
  if (!model.empty()) return check_model(model, cfgs_of(configs), config_dir);
  if (data.empty()) {
    std::cerr << "onnx_conformance: --data DIR is required\n";
    return 2;
  }
  const int k = std::stoi(shard.substr(0, shard.find('/')));
  const int n = std::stoi(shard.substr(shard.find('/') + 1));
  const std::vector<std::string> cfgs = cfgs_of(configs);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(data + "/" + suite)) {
    if (fs::exists(e.path() / "model.onnx")) names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  std::ofstream out;
  if (!results.empty()) out.open(results);
  int pass_ref = 0, pass_chip = 0, skipped = 0, failed = 0, total = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    if (static_cast<int>(i % n) != k) continue;
    if (!only.empty() && names[i] != only) continue;
    ++total;
    Case c;
    c.name = names[i];
    c.dir = data + "/" + suite + "/" + names[i];
    json r = {{"suite", suite}, {"test", c.name}};
    std::vector<std::string> ops;
    std::string why = load(c);
    if (!why.empty()) {
      r["status"] = "skip";
      r["reason"] = why;
      ++skipped;
    } else {
      why = check_reference(c);
      if (why.find("is out of range [0, ") != std::string::npos) {
        // Run-time Gather ids must lie in [0, V): ONNX's negative ids are a documented gap.
        r["status"] = "skip";
        r["reason"] = "negative run-time Gather ids are not supported: " + why;
        ++skipped;
      } else if (!why.empty()) {
        r["status"] = "fail";
        r["reason"] = "reference " + why;
        ++failed;
      } else {
        ++pass_ref;
        r["reference"] = "pass";
        if (c.bound_constants) r["constants"] = true;
        std::string status = "pass";
        for (const std::string& cfg : cfgs) {
          json chip = in_child(c, config_dir, cfg);
          r["chip"][cfg] = chip;
          const std::string s = chip["status"];
          if (s == "fail")
            status = "fail";
          else if (s == "skip" && status == "pass")
            status = "skip";
          if (s != "pass" && !r.contains("reason"))
            r["reason"] = cfg + ": " + std::string(chip["reason"]);
        }
        r["status"] = status;
        if (status == "pass") ++pass_chip;
        if (status == "fail") ++failed;
        if (status == "skip") ++skipped;
      }
    }
    if (r["status"] == "fail")
      std::cout << "FAIL " << c.name << ": " << std::string(r["reason"]) << "\n";
    if (out) out << r.dump() << "\n";
  }
  std::cout << suite << " shard " << shard << ": " << total << " tests, " << pass_ref
            << " pass on the reference, " << pass_chip << " pass on the reference and on chip ("
            << configs << "), " << skipped << " skipped, " << failed << " failed\n";
  return failed ? 1 : 0;
}
