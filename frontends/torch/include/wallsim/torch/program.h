// Program files (docs/PROGRAM_FORMAT.md): a captured PyTorch op stream — an optional set-up
// section, then weights, inputs, graph ops with their ATen origin, host ops, reads, frees and
// step boundaries — read strictly and validated against the graph IR's shape inference. No
// SystemC, no runtime.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wallsim/base/params.h"
#include "wallsim/compiler_stub/graph.h"

namespace wallsim::torch {

inline constexpr int kProgramFormatVersion = 1;

// A tensor as the capture saw it: concrete shape; `dim_names[k]` names axis k ("" unnamed).
struct ProgramTensor {
  int32_t id = -1;
  isa::DType dtype = isa::DType::fp32;
  std::vector<int64_t> shape;
  std::vector<std::string> dim_names;  // empty, or one per axis
  compiler_stub::TensorType type() const;
};

// The product of a concrete shape's extents from axis `from` on (1 for none): its elements.
int64_t elements(const std::vector<int64_t>& shape, size_t from = 0);

// An integer attribute written relative to a named dimension ({"dim": NAME, "offset": K}):
// resolved to NAME's current extent (its extent at its latest definition) + K; kept for a
// bounded replay.
struct RelativeAttr {
  std::string key;
  std::string dim;
  int64_t offset = 0;
};

enum class EventKind : uint8_t { weight, input, op, host_op, read, free, step, grad };
std::string_view name_of(EventKind k);

struct Event {
  EventKind kind = EventKind::step;
  size_t index = 0;   // in Program::events (set-up events first; event_error names its place)
  ProgramTensor out;  // weight, input, op: the tensor it defines; read, free, grad: out.id
  std::string name;   // weight, input: the parameter or argument name; grad: its parameter's
  // op: the graph op (id = out.id, inputs, attrs with relative ones resolved, dtype).
  compiler_stub::Node node;
  std::vector<RelativeAttr> relative;
  int32_t inplace_of = -1;             // op: the id whose value it replaces (informational), or -1
  std::string aten, module;            // op, host_op
  std::vector<int32_t> inputs;         // host_op
  std::vector<ProgramTensor> outputs;  // host_op
  double flops = 0, bytes = 0;         // host_op
  std::string reason;                  // read
  int64_t read_index = -1;             // read: n, its values file r<n>.npy
};

struct Program {
  std::string file;  // as given
  std::string name;
  std::string values;  // directory of .npy values (absolute or relative to the cwd); "" none
  std::vector<std::string> dim_names;  // every named axis, in order of first appearance
  // The file's `setup` events (no step boundary among them), then its `events`.
  std::vector<Event> events;
  // events[0, setup) are the set-up section: replayed once before the steps; the values it
  // leaves live stay live for every step (no step frees them).
  size_t setup = 0;
  // Event index ranges [begin, end) of each step (weights stay in the step they appear in).
  std::vector<std::pair<size_t, size_t>> steps;
};

// Reads and validates `path`. Every problem is a base::InputError(path, "events[i] (kind):
// ...") (or "setup[i] ...") or a JSON path: unknown keys or events, an id defined twice or used
// before it is defined or after it is freed, an op whose inferred type disagrees with the
// captured shape or dtype, a missing values file; a step boundary in the set-up section, a
// set-up event using a value the set-up did not make, a step freeing a set-up value.
Program read_program_file(const std::string& path);

// A values file's elements (row-major, as floats) for tensor `t`; its shape must be t's.
// Throws base::InputError naming the file.
std::vector<float> read_values(const std::string& npy, const ProgramTensor& t);

// Where event `e` is in the file: "setup[i]" or "events[i]".
std::string event_place(const Program& p, const Event& e);

// The one-line error for event `e` of `p`: base::InputError(p.file, "events[i] (kind op,
// aten): problem").
base::InputError event_error(const Program& p, const Event& e, const std::string& problem);

// The values file of a weight (w), input (i), host-op output (o) or read (r<n>).
std::string value_file(const Program& p, char kind, int64_t n);

}  // namespace wallsim::torch
