// Tensors as NumPy .npy files (the exchange format of the golden tests and of tensors dumped by the CLI),
// over core/npy.h's raw reader and writer. bf16 travels as '<u2' raw bits (core/npy.h).
#pragma once
#include <optional>
#include <string>

#include "core/npy.h"
#include "eager/tensor.h"

namespace kiln {

// Reads `path` into a new contiguous CPU tensor. Files in Fortran order are read correctly (the result is
// still C-contiguous). `as` as in read_npy_file. Throws kiln::Error for malformed files.
Tensor read_npy(const std::string& path, std::optional<DType> as = std::nullopt);

// Writes `t` (any strides) to `path` atomically. Throws kiln::Error for meta tensors and I/O errors.
void write_npy(const std::string& path, const Tensor& t);

}  // namespace kiln
