// kiln::Tensor: a typed, strided window (sizes, strides, offset) onto a shared Storage, plus autograd state.
// Tensors are cheap handles (shared ownership). A "meta" tensor has sizes and dtype but no storage: shape
// inference and the graph verifier run ops on meta tensors. The operators themselves live in ops/api.h.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <source_location>
#include <span>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/scalar.h"

namespace kiln {

using Shape = std::vector<int64_t>;

// What a value in a graph (or the output of shape inference) knows about a tensor without its data.
struct TensorMeta {
  DType dtype = DType::F32;
  Shape sizes;
  Shape strides;
  Device device;
  bool operator==(const TensorMeta&) const = default;
};

Shape contiguous_strides(const Shape& sizes);
int64_t shape_numel(const Shape& sizes);
std::string shape_str(const Shape& sizes);  // "[2, 3]"
// Normalises a possibly negative dim against `ndim` (Python rules); throws naming `op` when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, std::string_view op);

class Node;
struct AutogradMeta;
class Tensor;

struct TensorImpl {
  std::shared_ptr<Storage> storage;  // null for meta tensors
  int64_t offset = 0;                // in elements
  Shape sizes, strides;              // strides in elements
  DType dtype = DType::F32;
  Device device;
  bool wrapped_number = false;  // a Python-like scalar operand (lower priority in type promotion)
  // Views: the tensor whose storage this one aliases (the root base, never itself a view). In-place writes
  // through a view rewrite the base's autograd history.
  std::shared_ptr<TensorImpl> view_base;
  std::unique_ptr<AutogradMeta> autograd;
  TensorImpl();
  ~TensorImpl();
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- factories ----
  static Tensor empty(const Shape& sizes, DType dtype = DType::F32, Device device = {});
  static Tensor empty_strided(const Shape& sizes, const Shape& strides, DType dtype, Device device = {});
  static Tensor meta(const TensorMeta& m);
  static Tensor scalar(Scalar v, DType dtype);
  static Tensor wrapped_number(Scalar v);  // 0-dim f64/i64/bool tensor marked as a Python number
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& sizes);

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  DType dtype() const { return impl_->dtype; }
  const Shape& sizes() const { return impl_->sizes; }
  const Shape& strides() const { return impl_->strides; }
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return int64_t(impl_->sizes.size()); }
  int64_t numel() const { return shape_numel(impl_->sizes); }
  int64_t offset() const { return impl_->offset; }
  Device device() const { return impl_->device; }
  bool is_meta() const { return impl_->storage == nullptr; }
  bool is_wrapped_number() const { return impl_->wrapped_number; }
  bool is_contiguous() const;
  TensorMeta meta() const { return {dtype(), sizes(), strides(), device()}; }
  const std::shared_ptr<Storage>& storage() const { return impl_->storage; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }
  std::string str() const;  // "f32[2, 3]"

  // ---- data ----
  void* data_ptr() const;  // address of element 0 (offset applied)
  template <class T> T* data() const {
    KILN_CHECK(DTypeOf<T>::value == dtype(), "data<{}>() on a {} tensor", dtype_name(DTypeOf<T>::value), dtype_name(dtype()));
    return static_cast<T*>(data_ptr());
  }
  // Reads of values on the host. `where` (the caller's line) is for capture's TensorReadObserver (below).
  Scalar item(std::source_location where = std::source_location::current()) const;  // the single element
  template <class T> T item(std::source_location where = std::source_location::current()) const;
  // bool(t) in PyTorch: the single element is non-zero.
  bool is_nonzero(std::source_location where = std::source_location::current()) const;
  // All elements in row-major order, as f64.
  std::vector<double> to_double_vector(std::source_location where = std::source_location::current()) const;

  // ---- autograd ----
  // The calls below that read or change a tensor's autograd state (all but requires_grad, grad_fn, is_leaf and
  // backward) are defined by the engine (src/autograd/autograd.cpp): inside a function being captured each is
  // an eager region (docs/capture.md), so a compiled call repeats it on that call's tensors. `where` names the
  // user's line there.
  bool requires_grad() const;
  Tensor& set_requires_grad(bool r, std::source_location where = std::source_location::current());  // only on leaves
  Tensor grad(std::source_location where = std::source_location::current()) const;
  void set_grad(const Tensor& g, std::source_location where = std::source_location::current());
  const std::shared_ptr<Node>& grad_fn() const;
  bool is_leaf() const;
  // Runs backward from this tensor; `gradient` defaults to ones for a single-element tensor.
  void backward(const Tensor& gradient = {}, bool retain_graph = false, bool create_graph = false,
                std::source_location where = std::source_location::current()) const;
  // The `detach` op (defined in ops/dispatch.cpp): shares storage, no history; capture records it.
  Tensor detach(std::source_location where = std::source_location::current()) const;
  // Hook called with the gradient w.r.t. this tensor; may return a replacement (or an undefined Tensor to keep it).
  void register_hook(std::function<Tensor(const Tensor&)> hook,
                     std::source_location where = std::source_location::current()) const;
  void retain_grad(std::source_location where = std::source_location::current()) const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Copies `values` into a new contiguous tensor of the matching dtype.
template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& sizes) {
  KILN_CHECK(int64_t(values.size()) == shape_numel(sizes), "from_vector: {} values for shape {}", values.size(), shape_str(sizes));
  Tensor t = empty(sizes, DTypeOf<T>::value);
  T* p = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}

template <class T> T Tensor::item(std::source_location where) const {
  Scalar s = item(where);
  if constexpr (std::is_same_v<T, bool>) return s.to_bool();
  else if constexpr (std::is_integral_v<T>) return T(s.to_int());
  else return T(s.to_double());
}

// Capture's hook on host reads (src/capture): while an observer is installed on this thread, item(),
// is_nonzero() and to_double_vector() report the read (and the user's line) before reading. The dispatcher
// removes it while an op runs, so kernels' own reads are not reported. The observer may throw.
enum class TensorRead : uint8_t { Item, Bool, Elements };
class TensorReadObserver {
 public:
  virtual ~TensorReadObserver() = default;
  virtual void read(const Tensor& t, TensorRead kind, const std::source_location& where) = 0;
};
// Installs `o` on this thread (null removes it); returns the previous observer.
TensorReadObserver* set_tensor_read_observer(TensorReadObserver* o);

// A tensor made from a view op shares storage with its input; `make_view` builds one.
Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset);

// Grad mode: autograd records history only while enabled (RAII guard to disable, like torch.no_grad()).
bool grad_mode_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;
 private:
  bool prev_;
};
class EnableGradGuard {
 public:
  explicit EnableGradGuard(bool enabled = true);
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;
 private:
  bool prev_;
};

// Human-readable rendering of values (used by the CLI and test failure messages).
std::string format_tensor(const Tensor& t, int max_elements = 64);

}  // namespace kiln
