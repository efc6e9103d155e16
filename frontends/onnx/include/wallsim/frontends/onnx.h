// ONNX import: a ModelProto (ai.onnx opsets 1-17) to a wallsim graph. Graph inputs become
// `input` nodes, initializers and Constant nodes become weights (their values kept, written as
// .npy on request), integer shape computations (Shape, Gather, Concat, Unsqueeze, ... of
// constants) are folded at import, and every ONNX node maps onto the graph IR's ops
// (docs/ONNX_COVERAGE.md lists them). Every failure is a base::InputError with a one-line
// reason: a malformed or truncated file, an unknown opset or op, a dynamic dim without a bound.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "wallsim/compiler_stub/graph.h"
#include "wallsim/compiler_stub/reference.h"

namespace wallsim::frontends::onnx {

struct ImportOptions {
  // Values for symbolic dims (dim_param) of the graph inputs, by name; a symbolic dim not
  // bound here is an error.
  std::map<std::string, int64_t> dims;
  std::string name;  // the graph's name; default: the model file's stem
  // Graph inputs given fixed values (serialized TensorProto files) by ONNX name: they become
  // constants, so shape inputs (Reshape's shape, Slice's starts...) fold at import.
  std::map<std::string, std::string> constant_files;
};

struct Imported {
  compiler_stub::Graph graph;  // types inferred
  // The values of the weights (initializers and constants), by graph input name.
  std::map<std::string, compiler_stub::HostTensor> weights;
  // The ONNX graph inputs (not initializers) in order: ONNX name -> graph input name.
  std::vector<std::pair<std::string, std::string>> inputs;
  // The ONNX graph outputs in order (parallel to graph.outputs).
  std::vector<std::string> outputs;
  int64_t opset = 0;
};

// Reads and imports an .onnx file. Throws base::InputError(path, reason).
Imported import_file(const std::string& path, const ImportOptions& options = {});
// Imports a serialized ModelProto (`where` names it in errors).
Imported import_bytes(const std::string& bytes, const std::string& where,
                      const ImportOptions& options = {});

// The names of a model file's graph inputs that are not initializers, in order.
std::vector<std::string> input_names(const std::string& path);

// The ONNX ops (ai.onnx domain) the importer maps, sorted.
std::vector<std::string> supported_ops();

// A serialized TensorProto (the test data's input_*.pb / output_*.pb) as fp32 values; integer
// and bool tensors hold their values as floats. `dtype` gets ONNX's element type name
// ("float", "int64", ...). Throws base::InputError(path, reason) for a malformed file or an
// element type without a float value (string, complex).
compiler_stub::HostTensor read_tensor_file(const std::string& path, std::string* dtype = nullptr);

// Writes each weight as <dir>/<name>.npy (float32, or int32 for int32 weights).
void write_weights(const Imported& imported, const std::string& dir);

}  // namespace wallsim::frontends::onnx
