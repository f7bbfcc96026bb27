// Tensor handles: factories, metadata queries, element access, printing, and the autograd accessors.
#include "eager/tensor.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/device_hooks.h"
#include "core/size_math.h"
#include "eager/device_copy.h"
#include "eager/autograd_meta.h"

namespace kiln {

TensorImpl::TensorImpl() = default;
TensorImpl::~TensorImpl() = default;

Shape contiguous_strides(const Shape& sizes) {
  Shape st(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    st[i] = s;
    // The product over all dims is checked too: a shape is only representable when it fits.
    if (__builtin_mul_overflow(s, std::max<int64_t>(sizes[i], 1), &s)) {
      bool empty = std::find(sizes.begin(), sizes.end(), 0) != sizes.end();
      if (empty) throw SizeOverflowError(fmt::format("the strides of the result (shape {}) would not fit in 64 bits; "
                                                     "check the arguments", shape_str(sizes)));
      throw SizeOverflowError(fmt::format("{} (shape {}); check the arguments", kTooManyElements, shape_str(sizes)));
    }
  }
  return st;
}

int64_t shape_numel(const Shape& sizes) {
  if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) return 0;
  int64_t n = 1;
  for (int64_t s : sizes)
    if (__builtin_mul_overflow(n, s, &n))
      throw SizeOverflowError(fmt::format("{} (shape {}); check the arguments", kTooManyElements, shape_str(sizes)));
  return n;
}

std::string shape_str(const Shape& sizes) { return fmt::format("[{}]", fmt::join(sizes, ", ")); }

int64_t wrap_dim(int64_t dim, int64_t ndim, std::string_view op) {
  int64_t n = std::max<int64_t>(ndim, 1);  // a 0-dim tensor accepts dim 0 and -1, like PyTorch
  KILN_CHECK(dim >= -n && dim < n, "{}: dimension {} is out of range for a tensor of {} dimensions (valid: {} to {})",
             op, dim, ndim, -n, n - 1);
  return dim < 0 ? dim + n : dim;
}

Tensor Tensor::empty(const Shape& sizes, DType dtype, Device device) {
  return empty_strided(sizes, contiguous_strides(sizes), dtype, device);
}

Tensor Tensor::empty_strided(const Shape& sizes, const Shape& strides, DType dtype, Device device) {
  KILN_CHECK(sizes.size() == strides.size(), "empty_strided: {} sizes but {} strides", sizes.size(), strides.size());
  int64_t extent = 1;  // elements needed to hold the largest index
  for (size_t i = 0; i < sizes.size(); ++i) {
    KILN_CHECK(sizes[i] >= 0, "negative dimension {} in shape {}", sizes[i], shape_str(sizes));
    if (sizes[i] == 0) { extent = 0; break; }
    int64_t reach;
    if (__builtin_mul_overflow(sizes[i] - 1, strides[i], &reach) || __builtin_add_overflow(extent, reach, &extent))
      extent = std::numeric_limits<int64_t>::max();  // reported as too large below
  }
  KILN_CHECK(extent < (int64_t(1) << 40), "shape {} of {} is too large to allocate", shape_str(sizes), dtype_name(dtype));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::allocate(extent * dtype_size(dtype), device);
  impl->sizes = sizes;
  impl->strides = strides;
  impl->dtype = dtype;
  impl->device = device;
  return Tensor(std::move(impl));
}

Tensor Tensor::meta(const TensorMeta& m) {
  auto impl = std::make_shared<TensorImpl>();
  impl->sizes = m.sizes;
  impl->strides = m.strides.size() == m.sizes.size() ? m.strides : contiguous_strides(m.sizes);
  impl->dtype = m.dtype;
  impl->device = m.device;
  return Tensor(std::move(impl));
}

Tensor Tensor::scalar(Scalar v, DType dtype) {
  Tensor t = empty({}, dtype);
  KILN_DISPATCH_ALL(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_same_v<T, bool>) *t.data<T>() = v.to_bool();
    else if constexpr (std::is_integral_v<T>) *t.data<T>() = T(v.to_int());
    else if constexpr (std::is_same_v<T, double>) *t.data<T>() = v.to_double();
    else *t.data<T>() = T(float(v.to_double()));
  });
  return t;
}

Tensor Tensor::wrapped_number(Scalar v) {
  Tensor t = scalar(v, v.dtype());
  t.impl_->wrapped_number = true;
  return t;
}

int64_t Tensor::size(int64_t d) const { return sizes()[size_t(wrap_dim(d, dim(), "size"))]; }
int64_t Tensor::stride(int64_t d) const { return strides()[size_t(wrap_dim(d, dim(), "stride"))]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = sizes().size(); i-- > 0;) {
    if (sizes()[i] == 1) continue;
    if (sizes()[i] == 0) return true;
    if (strides()[i] != expected) return false;
    expected *= sizes()[i];
  }
  return true;
}

std::string Tensor::str() const {
  if (!defined()) return "undefined";
  return fmt::format("{}{}", dtype_name(dtype()), shape_str(sizes()));
}

void* Tensor::data_ptr() const {
  KILN_CHECK(!is_meta(), "tensor {} has no data (it is a meta tensor)", str());
  char* base = static_cast<char*>(storage()->data());
  // An empty storage has no memory (null): no element to point at, and an offset from null is undefined.
  if (base == nullptr) return nullptr;
  return base + offset() * dtype_size(dtype());
}

namespace {
// The first and one-past-last storage elements `t` reaches (first == last for an empty tensor).
std::pair<int64_t, int64_t> element_span(const Tensor& t) {
  if (t.numel() == 0) return {t.offset(), t.offset()};
  int64_t lo = t.offset(), hi = t.offset();
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t reach = (t.sizes()[size_t(d)] - 1) * t.strides()[size_t(d)];
    (reach < 0 ? lo : hi) += reach;
  }
  return {lo, hi + 1};
}

Tensor host_values(const Tensor& t) { return t.device().type == DeviceType::CPU ? t : to_device(t, Device{}); }
}  // namespace

Tensor to_device(const Tensor& t, Device device) {
  KILN_CHECK(t.defined() && !t.is_meta(), "to({}): {} has no data", device.str(), t.defined() ? t.str() : "an undefined tensor");
  if (device == t.device()) return t;
  const auto [lo, hi] = element_span(t);
  const int64_t esize = dtype_size(t.dtype());
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::allocate((hi - lo) * esize, device);
  impl->offset = t.offset() - lo;
  impl->sizes = t.sizes();
  impl->strides = t.strides();
  impl->dtype = t.dtype();
  impl->device = device;
  copy_bytes(impl->storage->data(), device, static_cast<const char*>(t.storage()->data()) + lo * esize, t.device(),
             (hi - lo) * esize);
  return Tensor(std::move(impl));
}

namespace {
// Element `linear` (row-major over sizes) of `t` (on the host), honouring strides.
double element_as_double(const Tensor& t, int64_t linear) {
  int64_t off = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    int64_t s = t.sizes()[d];
    off += (linear % s) * t.strides()[d];
    linear /= s;
  }
  return KILN_DISPATCH_ALL(t.dtype(), [&](auto z) {
    using T = decltype(z);
    return double(static_cast<const T*>(t.data_ptr())[off]);
  });
}
}  // namespace

namespace {
thread_local TensorReadObserver* t_read_observer = nullptr;
}  // namespace

TensorReadObserver* set_tensor_read_observer(TensorReadObserver* o) {
  TensorReadObserver* previous = t_read_observer;
  t_read_observer = o;
  return previous;
}

Scalar Tensor::item(std::source_location where) const {
  if (t_read_observer) t_read_observer->read(*this, TensorRead::Item, where);
  KILN_CHECK(numel() == 1, "item(): a tensor with {} elements cannot be converted to a number", numel());
  Tensor t = host_values(*this);
  return KILN_DISPATCH_ALL(dtype(), [&](auto z) -> Scalar {
    using T = decltype(z);
    T v = *static_cast<const T*>(t.data_ptr());
    if constexpr (std::is_same_v<T, bool>) return Scalar(v);
    else if constexpr (std::is_integral_v<T>) return Scalar(int64_t(v));
    else return Scalar(double(v));
  });
}

bool Tensor::is_nonzero(std::source_location where) const {
  if (t_read_observer) t_read_observer->read(*this, TensorRead::Bool, where);
  KILN_CHECK(numel() == 1, "is_nonzero(): a tensor with {} elements is ambiguous as a bool", numel());
  TensorReadObserver* off = set_tensor_read_observer(nullptr);  // one read, reported once
  bool value = item().to_bool();
  set_tensor_read_observer(off);
  return value;
}

std::vector<double> Tensor::to_double_vector(std::source_location where) const {
  if (t_read_observer) t_read_observer->read(*this, TensorRead::Elements, where);
  std::vector<double> out(static_cast<size_t>(numel()));
  const Tensor t = host_values(*this);
  for (int64_t i = 0; i < numel(); ++i) out[size_t(i)] = element_as_double(t, i);
  return out;
}

Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->offset = offset;
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->dtype = base.dtype();
  impl->device = base.device();
  impl->view_base = base.impl()->view_base ? base.impl()->view_base : base.impl_ptr();
  return Tensor(std::move(impl));
}

// ---------------------------------------------------------------- autograd accessors
// Tensor::backward, retain_grad and the state calls capture must see (set_requires_grad, grad, set_grad,
// register_hook) are defined by the engine, src/autograd/autograd.cpp, over the raw functions here;
// Tensor::detach (an op call) by the dispatcher, src/ops/dispatch.cpp.
AutogradMeta& autograd_meta(const Tensor& t) {
  if (!t.impl()->autograd) t.impl()->autograd = std::make_unique<AutogradMeta>();
  return *t.impl()->autograd;
}

bool Tensor::requires_grad() const { return impl_->autograd && impl_->autograd->requires_grad; }

void set_requires_grad_raw(const Tensor& t, bool r) {
  KILN_CHECK(!t.grad_fn(), "set_requires_grad: only leaf tensors can be set; {} was computed by {} (use detach() first)",
             t.str(), t.grad_fn()->name());
  KILN_CHECK(!r || is_floating(t.dtype()), "set_requires_grad: only floating-point tensors can require gradients, not {}",
             t.str());
  autograd_meta(t).requires_grad = r;
}

Tensor stored_grad(const Tensor& t) { return t.impl()->autograd ? t.impl()->autograd->grad : Tensor(); }
void set_grad_raw(const Tensor& t, const Tensor& g) { autograd_meta(t).grad = g; }

const std::shared_ptr<Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<Node> none;
  return impl_->autograd ? impl_->autograd->grad_fn : none;
}

bool Tensor::is_leaf() const { return !grad_fn(); }

void register_hook_raw(const Tensor& t, GradHook hook) {
  KILN_CHECK(t.requires_grad(), "register_hook: {} does not require grad, so no gradient will reach the hook", t.str());
  if (auto fn = t.grad_fn()) {
    uint32_t nr = t.impl()->autograd->output_nr;
    if (fn->pre_hooks.size() <= nr) fn->pre_hooks.resize(nr + 1);
    fn->pre_hooks[nr].push_back(std::move(hook));
  } else {
    t.impl()->autograd->leaf_hooks.push_back(std::move(hook));
  }
}

// ---------------------------------------------------------------- grad mode
namespace {
thread_local bool g_grad_mode = true;
}
bool grad_mode_enabled() { return g_grad_mode; }
NoGradGuard::NoGradGuard() : prev_(g_grad_mode) { g_grad_mode = false; }
NoGradGuard::~NoGradGuard() { g_grad_mode = prev_; }
EnableGradGuard::EnableGradGuard(bool enabled) : prev_(g_grad_mode) { g_grad_mode = enabled; }
EnableGradGuard::~EnableGradGuard() { g_grad_mode = prev_; }

// ---------------------------------------------------------------- printing
std::string format_tensor(const Tensor& shown_tensor, int max_elements) {
  if (!shown_tensor.defined()) return "undefined";
  std::string out = shown_tensor.str();
  if (shown_tensor.is_meta()) return out + " (meta)";
  if (shown_tensor.device().type != DeviceType::CPU) out += " @" + shown_tensor.device().str();
  const Tensor t = host_values(shown_tensor);
  int64_t n = t.numel();
  out += " = ";
  if (n == 0) return out + "[]";
  // Nested brackets, row-major; elided after max_elements.
  std::vector<int64_t> idx(size_t(t.dim()), 0);
  std::string body;
  int64_t shown = std::min<int64_t>(n, max_elements);
  bool is_float = is_floating(t.dtype());
  for (int64_t i = 0; i < shown; ++i) {
    int64_t rem = i, opens = 0;
    for (int64_t d = t.dim() - 1; d >= 0; --d) {
      int64_t s = t.sizes()[d];
      if (rem % s == 0) ++opens; else break;
      rem /= s;
    }
    if (i > 0) {
      // close the dims that ended at i-1
      body += std::string(size_t(opens), ']');
      body += opens ? ",\n  " + std::string(size_t(t.dim() - opens), ' ') : ", ";
    }
    body += std::string(size_t(i == 0 ? t.dim() : opens), '[');
    double v = element_as_double(t, i);
    if (t.dtype() == DType::Bool) body += v != 0 ? "True" : "False";
    else if (is_float) body += fmt::format("{:.6g}", v);
    else body += fmt::format("{}", int64_t(v));
  }
  if (shown < n) body += fmt::format(", ... ({} more)", n - shown);
  body += std::string(size_t(t.dim()), ']');
  return out + body;
}

}  // namespace kiln
