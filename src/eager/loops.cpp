// Broadcasting helpers and the dtype-converting copy (the one kernel every conversion goes through; device
// tensors through the host).
#include "eager/loops.h"

#include "core/device_hooks.h"
#include "eager/device_copy.h"

namespace kiln {

Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    KILN_CHECK(x == y || x == 1 || y == 1,
               "{}: shapes {} and {} cannot be broadcast together (dimension {} is {} vs {}; sizes must match or "
               "one of them must be 1)", op, shape_str(a), shape_str(b), int64_t(i) - int64_t(n), x, y);
    out[i] = x == 1 ? y : x;
  }
  return out;
}

Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  Shape st(shape.size(), 0);
  size_t off = shape.size() - size_t(t.dim());
  KILN_CHECK(size_t(t.dim()) <= shape.size(), "cannot broadcast {} to {}", t.str(), shape_str(shape));
  for (size_t i = 0; i < size_t(t.dim()); ++i) {
    int64_t s = t.sizes()[i];
    KILN_CHECK(s == shape[i + off] || s == 1, "cannot broadcast {} to {}", t.str(), shape_str(shape));
    st[i + off] = s == 1 ? 0 : t.strides()[i];
  }
  return st;
}

namespace {
// copy_into where either tensor lives on a device: eager loops read and write host memory, so the source's values
// and the destination's span come to the host, and the span goes back (eager/device_copy.h).
void copy_into_through_host(const Tensor& dst, const Tensor& src) {
  const Tensor host_src = to_device(src, Device{});
  if (dst.device().type == DeviceType::CPU) return copy_into(dst, host_src);
  const Tensor host_dst = to_device(dst, Device{});  // the span dst covers, dst's offset within it kept
  copy_into(host_dst, host_src);
  const int64_t span_start = dst.offset() - host_dst.offset();
  copy_bytes(static_cast<char*>(dst.storage()->data()) + span_start * dtype_size(dst.dtype()), dst.device(),
             host_dst.storage()->data(), Device{}, host_dst.storage()->nbytes());
}
}  // namespace

void copy_into(const Tensor& dst, const Tensor& src) {
  if (dst.device().type != DeviceType::CPU || src.device().type != DeviceType::CPU) return copy_into_through_host(dst, src);
  KILN_DISPATCH_ALL(dst.dtype(), [&](auto d) {
    using To = decltype(d);
    KILN_DISPATCH_ALL(src.dtype(), [&](auto s) {
      using From = decltype(s);
      map1<To, From>(dst, src, [](From v) { return convert_element<To>(v); });
    });
  });
}

Tensor as_contiguous_dtype(const Tensor& t, DType dt) {
  if (t.dtype() == dt && t.is_contiguous()) return t;
  Tensor out = Tensor::empty(t.sizes(), dt, t.device());
  copy_into(out, t);
  return out;
}

}  // namespace kiln
