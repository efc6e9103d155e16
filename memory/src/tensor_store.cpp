// TensorStore: named off-chip tensors, deterministic random fill and float export.
#include "wallsim/memory/tensor_store.h"

#include <random>

#include "wallsim/isa/dtype_convert.h"
#include "wallsim/memory/memory_error.h"

namespace wallsim::memory {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Element count, or -1 when a dimension is negative or the byte size overflows.
int64_t checked_elements(const std::vector<int64_t>& shape, isa::DType dtype) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  }
  int64_t bytes;
  if (__builtin_mul_overflow(n, int64_t{isa::dtype_bytes(dtype)}, &bytes)) return -1;
  return n;
}

}  // namespace

int64_t TensorStore::Tensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) return INT64_MAX;
  }
  return n;
}

TensorStore::Tensor& TensorStore::put(const std::string& name, isa::MemSpace space,
                                      isa::DType dtype, std::vector<int64_t> shape) {
  int64_t n = checked_elements(shape, dtype);
  if (n < 0) throw MemoryError("tensor '" + name + "': invalid shape " + shape_text(shape));
  size_t bytes = static_cast<size_t>(n) * isa::dtype_bytes(dtype);
  auto it = m_tensors.find(name);
  if (it != m_tensors.end()) {
    const Tensor& t = it->second;
    if (t.space == space && t.dtype == dtype && t.shape == shape && t.bytes.size() == bytes)
      return it->second;
  }
  Tensor fresh{space, dtype, std::move(shape), std::vector<uint8_t>(bytes, 0)};
  if (it == m_tensors.end()) return m_tensors.emplace(name, std::move(fresh)).first->second;
  it->second = std::move(fresh);
  return it->second;
}

TensorStore::Tensor* TensorStore::find(const std::string& name) {
  auto it = m_tensors.find(name);
  return it == m_tensors.end() ? nullptr : &it->second;
}

const TensorStore::Tensor* TensorStore::find(const std::string& name) const {
  auto it = m_tensors.find(name);
  return it == m_tensors.end() ? nullptr : &it->second;
}

std::vector<std::string> TensorStore::names() const {
  std::vector<std::string> out;
  out.reserve(m_tensors.size());
  for (const auto& [name, t] : m_tensors) out.push_back(name);
  return out;
}

void fill_random(TensorStore::Tensor& t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  int eb = isa::dtype_bytes(t.dtype);
  int64_t n = static_cast<int64_t>(t.bytes.size()) / eb;
  // The largest value below 1 in each float dtype: rounding may carry a draw up to 1.0.
  float below_one = t.dtype == isa::DType::bf16   ? 0.99609375f
                    : t.dtype == isa::DType::fp16 ? 0.99951171875f
                                                  : 0.99999994f;
  for (int64_t i = 0; i < n; ++i) {
    uint64_t x = rng();
    uint8_t* p = t.bytes.data() + i * eb;
    if (t.dtype == isa::DType::int32) {
      int32_t v = static_cast<int32_t>(x >> 60);  // [0, 16)
      std::memcpy(p, &v, 4);
      continue;
    }
    // 24 random bits -> k * 2^-23 - 1, exact in float, in [-1, 1).
    float v = static_cast<float>(x >> 40) * 1.1920928955078125e-7f - 1.0f;
    store_element(p, t.dtype, v);
    if (load_element(p, t.dtype) >= 1.0f) store_element(p, t.dtype, below_one);
  }
}

std::vector<float> to_floats(const TensorStore::Tensor& t) {
  int eb = isa::dtype_bytes(t.dtype);
  std::vector<float> out(t.bytes.size() / eb);
  load_elements(t.bytes.data(), t.dtype, out.data(), static_cast<int64_t>(out.size()));
  return out;
}

}  // namespace wallsim::memory
