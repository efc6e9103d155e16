// TensorStore: the named off-chip tensors (HBM and host memory), row-major, little-endian bytes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "wallsim/isa/types.h"

namespace wallsim::memory {

// Tensors are keyed by name alone (a plan binds them by name). The store owns the bytes;
// a Tensor reference or pointer stays valid until the store is destroyed (put() of an existing
// name reuses the same object, so its contents may change but the reference stays valid).
class TensorStore {
 public:
  struct Tensor {
    isa::MemSpace space = isa::MemSpace::hbm;
    isa::DType dtype = isa::DType::fp32;
    std::vector<int64_t> shape;  // row-major; empty = a scalar of one element
    std::vector<uint8_t> bytes;  // elements() * dtype_bytes(dtype)
    int64_t elements() const;
  };

  // Returns the tensor `name`: kept as is when it exists with this space, dtype and shape,
  // otherwise (re)created zero-filled. Throws MemoryError for a negative or overflowing shape.
  Tensor& put(const std::string& name, isa::MemSpace space, isa::DType dtype,
              std::vector<int64_t> shape);
  Tensor* find(const std::string& name);
  void erase(const std::string& name) { m_tensors.erase(name); }
  const Tensor* find(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted

 private:
  std::map<std::string, Tensor> m_tensors;
};

// Fills with values uniform in [-1, 1) (float dtypes) or integers in [0, 16) (int32), from
// std::mt19937_64 with a fixed mapping: the same seed gives the same bytes on every platform.
void fill_random(TensorStore::Tensor& t, uint64_t seed);

// All elements, row-major, widened to float.
std::vector<float> to_floats(const TensorStore::Tensor& t);

}  // namespace wallsim::memory
