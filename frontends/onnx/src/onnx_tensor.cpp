// TensorProto values: initializers, Constant nodes and the test data's .pb files.
#include <cstring>
#include <fstream>
#include <sstream>

#include "onnx_internal.h"
#include "wallsim/isa/dtype_convert.h"
#include "wallsim/memory/npy.h"

namespace wallsim::frontends::onnx {

using base::InputError;

// Saturates at INT64_MAX (every caller refuses a count that large).
int64_t count_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (__builtin_mul_overflow(n, d, &n)) return INT64_MAX;
  }
  return n;
}

int64_t folded_count(const Importer& m, const Shape& s) {
  std::string text;
  for (int64_t d : s) text += (text.empty() ? "" : ", ") + std::to_string(d);
  text = "[" + text + "]";
  for (int64_t d : s) {
    if (d < 0) m.fail("shape " + text + " has a negative dim");
    if (d == 0) return 0;
  }
  int64_t n = 1;
  for (int64_t d : s) n = n > kMaxFoldedElements / d ? kMaxFoldedElements + 1 : n * d;
  if (n > kMaxFoldedElements) {
    m.fail("a constant of shape " + text + " would hold more than 2^27 elements (" +
           "the most the importer folds)");
  }
  return n;
}

Shape strides_of(const Shape& s) {
  Shape st(s.size(), 1);
  for (size_t k = s.size(); k-- > 1;) st[k - 1] = st[k] * s[k];
  return st;
}

std::string elem_name(int32_t elem) {
  switch (elem) {
    case pb::TensorProto::FLOAT:
      return "float";
    case pb::TensorProto::UINT8:
      return "uint8";
    case pb::TensorProto::INT8:
      return "int8";
    case pb::TensorProto::UINT16:
      return "uint16";
    case pb::TensorProto::INT16:
      return "int16";
    case pb::TensorProto::INT32:
      return "int32";
    case pb::TensorProto::INT64:
      return "int64";
    case pb::TensorProto::STRING:
      return "string";
    case pb::TensorProto::BOOL:
      return "bool";
    case pb::TensorProto::FLOAT16:
      return "float16";
    case pb::TensorProto::DOUBLE:
      return "double";
    case pb::TensorProto::UINT32:
      return "uint32";
    case pb::TensorProto::UINT64:
      return "uint64";
    case pb::TensorProto::BFLOAT16:
      return "bfloat16";
    default:
      return "type " + std::to_string(elem);
  }
}

bool is_float_elem(int32_t e) {
  return e == pb::TensorProto::FLOAT || e == pb::TensorProto::FLOAT16 ||
         e == pb::TensorProto::DOUBLE || e == pb::TensorProto::BFLOAT16;
}

bool is_int_elem(int32_t e) {
  switch (e) {
    case pb::TensorProto::UINT8:
    case pb::TensorProto::INT8:
    case pb::TensorProto::UINT16:
    case pb::TensorProto::INT16:
    case pb::TensorProto::INT32:
    case pb::TensorProto::INT64:
    case pb::TensorProto::BOOL:
    case pb::TensorProto::UINT32:
    case pb::TensorProto::UINT64:
      return true;
    default:
      return false;
  }
}

namespace {

// Bytes per element of raw_data.
int item_bytes(int32_t e) {
  switch (e) {
    case pb::TensorProto::UINT8:
    case pb::TensorProto::INT8:
    case pb::TensorProto::BOOL:
      return 1;
    case pb::TensorProto::UINT16:
    case pb::TensorProto::INT16:
    case pb::TensorProto::FLOAT16:
    case pb::TensorProto::BFLOAT16:
      return 2;
    case pb::TensorProto::FLOAT:
    case pb::TensorProto::INT32:
    case pb::TensorProto::UINT32:
      return 4;
    case pb::TensorProto::INT64:
    case pb::TensorProto::DOUBLE:
    case pb::TensorProto::UINT64:
      return 8;
    default:
      return 0;
  }
}

template <class T>
double load(const char* p) {
  T x;
  std::memcpy(&x, p, sizeof x);
  return static_cast<double>(x);
}

double raw_value(int32_t e, const char* p) {
  switch (e) {
    case pb::TensorProto::FLOAT:
      return load<float>(p);
    case pb::TensorProto::UINT8:
      return load<uint8_t>(p);
    case pb::TensorProto::INT8:
      return load<int8_t>(p);
    case pb::TensorProto::UINT16:
      return load<uint16_t>(p);
    case pb::TensorProto::INT16:
      return load<int16_t>(p);
    case pb::TensorProto::INT32:
      return load<int32_t>(p);
    case pb::TensorProto::INT64:
      return load<int64_t>(p);
    case pb::TensorProto::BOOL:
      return load<uint8_t>(p) ? 1.0 : 0.0;
    case pb::TensorProto::FLOAT16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return isa::fp16_to_float(h);
    }
    case pb::TensorProto::BFLOAT16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return isa::bf16_to_float(h);
    }
    case pb::TensorProto::DOUBLE:
      return load<double>(p);
    case pb::TensorProto::UINT32:
      return load<uint32_t>(p);
    case pb::TensorProto::UINT64:
      return load<uint64_t>(p);
    default:
      return 0;
  }
}

}  // namespace

Const const_from_proto(const pb::TensorProto& t, const std::string& where) {
  Const c;
  c.elem = t.data_type();
  for (int64_t d : t.dims()) {
    if (d < 0 || d > (int64_t{1} << 40)) throw InputError(where, "bad dim " + std::to_string(d));
    c.shape.push_back(d);
  }
  if (t.data_location() == pb::TensorProto::EXTERNAL || t.external_data_size() > 0) {
    throw InputError(where, "tensor data stored outside the model file is not supported");
  }
  const int bytes = item_bytes(c.elem);
  if (!bytes) throw InputError(where, "element type " + elem_name(c.elem) + " is not supported");
  const int64_t n = c.count();
  if (n > (int64_t{1} << 32)) throw InputError(where, "tensor too large");
  if (t.has_raw_data()) {
    const std::string& raw = t.raw_data();
    if (static_cast<int64_t>(raw.size()) != n * bytes) {
      throw InputError(where, "raw_data holds " + std::to_string(raw.size()) + " bytes, " +
                                  std::to_string(n * bytes) + " expected for its shape");
    }
    c.v.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) c.v[i] = raw_value(c.elem, raw.data() + i * bytes);
    return c;
  }
  switch (c.elem) {
    case pb::TensorProto::FLOAT:
      c.v.assign(t.float_data().begin(), t.float_data().end());
      break;
    case pb::TensorProto::DOUBLE:
      c.v.assign(t.double_data().begin(), t.double_data().end());
      break;
    case pb::TensorProto::INT64:
      c.v.assign(t.int64_data().begin(), t.int64_data().end());
      break;
    case pb::TensorProto::UINT32:
    case pb::TensorProto::UINT64:
      c.v.assign(t.uint64_data().begin(), t.uint64_data().end());
      break;
    case pb::TensorProto::FLOAT16:
      for (int32_t h : t.int32_data()) c.v.push_back(isa::fp16_to_float(static_cast<uint16_t>(h)));
      break;
    case pb::TensorProto::BFLOAT16:
      for (int32_t h : t.int32_data()) c.v.push_back(isa::bf16_to_float(static_cast<uint16_t>(h)));
      break;
    default:  // int32 and narrower, bool
      c.v.assign(t.int32_data().begin(), t.int32_data().end());
      break;
  }
  if (static_cast<int64_t>(c.v.size()) != n) {
    throw InputError(where, "holds " + std::to_string(c.v.size()) + " values, " +
                                std::to_string(n) + " expected for its shape");
  }
  return c;
}

compiler_stub::HostTensor read_tensor_file(const std::string& path, std::string* dtype) {
  pb::TensorProto t;
  if (!t.ParseFromString(base::read_input_file(path))) {
    throw InputError(path, "not a valid TensorProto");
  }
  Const c = const_from_proto(t, path);
  if (dtype) *dtype = elem_name(c.elem);
  compiler_stub::HostTensor h;
  h.shape = c.shape;
  for (double v : c.v) h.data.push_back(static_cast<float>(v));
  return h;
}

void write_weights(const Imported& imported, const std::string& dir) {
  for (const auto& [name, t] : imported.weights) {
    const compiler_stub::Node* n = nullptr;
    for (const auto& node : imported.graph.nodes) {
      if (node.op == OpKind::input && node.name == name) n = &node;
    }
    memory::NpyArray a;
    a.shape = t.shape;
    if (n && n->type.dtype == isa::DType::int32) {
      a.descr = "<i4";
      for (float v : t.data) {
        int32_t x = static_cast<int32_t>(v);
        const auto* b = reinterpret_cast<const uint8_t*>(&x);
        a.data.insert(a.data.end(), b, b + 4);
      }
    } else {
      a.descr = "<f4";
      const auto* b = reinterpret_cast<const uint8_t*>(t.data.data());
      a.data.assign(b, b + t.data.size() * 4);
    }
    memory::write_npy(dir + "/" + name + ".npy", a);
  }
}

}  // namespace wallsim::frontends::onnx
