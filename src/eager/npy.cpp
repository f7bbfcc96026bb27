// read_npy / write_npy: a tensor's storage as the buffer of core/npy.h's raw reader and writer.
#include "eager/npy.h"
#include "eager/device_copy.h"

#include "core/size_math.h"
#include "eager/loops.h"

namespace kiln {

Tensor read_npy(const std::string& path, std::optional<DType> as) {
  Tensor file_layout;
  NpyHeader h = read_npy_file(path, as, [&](const NpyHeader& h) {
    if (h.fortran_order) {  // the data is the row-major layout of the reversed shape: column-major strides
      Shape strides(h.shape.size());
      int64_t st = 1;
      for (size_t d = 0; d < h.shape.size(); ++d) {
        strides[d] = st;
        // Checked: with a 0 in the shape the file is empty whatever the other sizes are, so they may be huge.
        st = checked_mul(st, std::max<int64_t>(h.shape[d], 1), "read_npy", "the column-major strides of " + path);
      }
      file_layout = Tensor::empty_strided(h.shape, strides, h.dtype);
    } else {
      file_layout = Tensor::empty(h.shape, h.dtype);
    }
    return file_layout.data_ptr();
  });
  return h.fortran_order ? as_contiguous_dtype(file_layout, h.dtype) : file_layout;
}

void write_npy(const std::string& path, const Tensor& t) {
  KILN_CHECK(t.defined(), "write_npy: {}: the tensor is undefined", path);
  KILN_CHECK(!t.is_meta(), "write_npy: {}: {} is a meta tensor (it has no data)", path, t.str());
  Tensor data = as_contiguous_dtype(to_device(t, Device{}), t.dtype());
  write_npy_file(path, data.dtype(), data.sizes(), data.data_ptr());
}

}  // namespace kiln
