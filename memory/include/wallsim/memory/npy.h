// NumPy .npy files: reading (format 1.0-3.0), writing (1.0) and conversion to and from tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wallsim/memory/tensor_store.h"

namespace wallsim::memory {

// A C-order, little-endian array as stored in a .npy file. `descr` is numpy's canonical dtype
// string: '<f2' '<f4' '<f8' '<i2' '<i4' '<i8' '<u2' '<u4' '<u8' '|i1' '|u1' '|b1'.
// `data` holds product(shape) * itemsize bytes; an empty shape is a 0-d array of one element.
struct NpyArray {
  std::string descr;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

// Throws base::InputError(path, reason) for anything it cannot read exactly: I/O errors, a bad
// magic or version, a malformed header, Fortran order, big-endian or unsupported dtypes, absurd
// shapes, truncated or trailing data.
NpyArray read_npy(const std::string& path);

// Writes format 1.0 via a temporary file in the same directory renamed over `path`, so readers
// never see a partial file. Throws base::InputError(path, reason) on I/O errors or when `array`
// is inconsistent (unsupported descr, data size not matching the shape).
void write_npy(const std::string& path, const NpyArray& array);

// Converts `array` into `tensor`'s dtype (floats as in dtype_convert.h; integers saturate to
// int32; float64 is rounded to float first). The shapes must be equal, else InputError naming
// `path_for_errors` and both shapes.
void load_npy_into(const NpyArray& array, TensorStore::Tensor& tensor,
                   const std::string& path_for_errors);

// fp32, bf16 and fp16 tensors become '<f4' (bf16 has no numpy dtype, so 16-bit float outputs
// are widened to float32, exactly); int32 tensors become '<i4'.
NpyArray npy_from_tensor(const TensorStore::Tensor& tensor);

}  // namespace wallsim::memory
