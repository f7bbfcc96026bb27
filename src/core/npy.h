// Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0, little-endian), the exchange format
// of the golden tests and of tensors dumped by the CLI. bfloat16 has no NumPy dtype: kiln writes it as '<u2'
// raw bits, which `torch.from_numpy(arr).view(torch.bfloat16)` or `arr.view(ml_dtypes.bfloat16)` reinterpret;
// reading such a file back as bf16 takes an explicit `as = DType::BF16`.
#pragma once
#include <optional>
#include <string>

#include "eager/tensor.h"

namespace kiln {

// Reads `path` into a new contiguous CPU tensor. Files in Fortran order are read correctly (the result is
// still C-contiguous). `as`, when given, is the dtype the caller expects: the file's dtype must match it,
// except that `as = BF16` reads a '<u2' file as raw bfloat16 bits. Throws kiln::Error naming the file and
// the problem for malformed files (bad magic, truncated or oversized data, unsupported or big-endian dtype).
Tensor read_npy(const std::string& path, std::optional<DType> as = std::nullopt);

// Writes `t` (any strides; bf16 as '<u2' raw bits) to `path` atomically: the data goes to a temporary file in
// the same directory, which is then renamed over `path`. Throws kiln::Error for meta tensors and I/O errors.
void write_npy(const std::string& path, const Tensor& t);

}  // namespace kiln
