// Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0, little-endian) over raw buffers:
// a dtype, a shape and the bytes. Tensors read and write through eager/npy.h, above this. bfloat16 has no
// NumPy dtype: kiln writes it as '<u2' raw bits, which `torch.from_numpy(arr).view(torch.bfloat16)` or
// `arr.view(ml_dtypes.bfloat16)` reinterpret; reading such a file back as bf16 takes an explicit
// `as = DType::BF16`.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace kiln {

struct NpyHeader {
  DType dtype = DType::F32;
  bool raw_u16 = false;        // '<u2': only readable as bf16 bits
  bool fortran_order = false;  // the data is the column-major layout of `shape`
  std::vector<int64_t> shape;
};

// Gives the buffer the data goes to: exactly numel(shape) * dtype_size(dtype) bytes, in the file's order.
using NpyAllocate = std::function<void*(const NpyHeader&)>;

// Reads `path`: checks the header, then the data into allocate(header) (bools normalised to 0/1). `as`, when
// given, is the dtype the caller expects: the file's dtype must match it, except that `as = BF16` reads a
// '<u2' file as raw bfloat16 bits. Throws kiln::Error naming the file and the problem for malformed files
// (bad magic, truncated or oversized data, unsupported or big-endian dtype).
NpyHeader read_npy_file(const std::string& path, std::optional<DType> as, const NpyAllocate& allocate);

// Writes C-contiguous `data` of `dtype` and `sizes` (bf16 as '<u2' raw bits) to `path` atomically: the data
// goes to a temporary file in the same directory, which is then renamed over `path`.
void write_npy_file(const std::string& path, DType dtype, const std::vector<int64_t>& sizes, const void* data);

}  // namespace kiln
