// Helpers shared by the op families: type promotion (torch.result_type), shape-inference shorthands, and
// the small patterns VJPs repeat.
#pragma once
#include <initializer_list>

#include "ops/api.h"
#include "ops/dispatch.h"

namespace kiln {

// torch.result_type over tensors (wrapped numbers and 0-dim tensors take lower priority).
DType result_type(std::initializer_list<Tensor> tensors);
DType result_type(const std::vector<Tensor>& tensors);

// c10's checked_convert: a number that does not fit `dt` (a finite value beyond a float dtype's range, a value
// outside an integer dtype's, NaN for an integer dtype) is an error naming `op`, not a silent wrap or UB.
void check_fits(const Scalar& v, DType dt, std::string_view op);

// torch.can_cast: whether an in-place op may store a `from` result into a `to` tensor.
bool can_cast_to(DType from, DType to);

// A contiguous meta of `sizes` and `dtype` (what most infer functions return).
inline TensorMeta contiguous_meta(Shape sizes, DType dtype, Device device = {}) {
  Shape strides = contiguous_strides(sizes);
  return TensorMeta{dtype, std::move(sizes), std::move(strides), device};
}

// The one output meta of an infer function, moved into the vector (`return {m}` would copy it out of the
// initializer list: two more allocations per call, which the .kir verifier pays once per node).
inline std::vector<TensorMeta> one_meta(TensorMeta m) {
  std::vector<TensorMeta> out;
  out.push_back(std::move(m));
  return out;
}

// Output dtype of a float-valued op (exp, sin, div, ...): floats keep theirs, integers and bool become f32.
inline DType float_result(DType in) { return is_floating(in) ? in : kDefaultFloat; }

// Normalised, de-duplicated reduction dims (empty `dims` means all dims when `empty_means_all`).
std::vector<int64_t> reduction_dims(const std::optional<IntList>& dims, int64_t ndim, std::string_view op,
                                    bool empty_means_all = true);
// Shape after reducing `dims` of `sizes` (keeping them as size 1 when keepdim).
Shape reduced_shape(const Shape& sizes, const std::vector<int64_t>& dims, bool keepdim);

// x centred over `dims` for variances (var, std, layer_norm, batch_norm): the two-pass algorithm on data shifted
// by each slice's first element x0, centred = (x - x0) - mean(x - x0), with mean = x0 + mean(x - x0) (keepdim
// shapes). The shift keeps the sums small where the values are large and close together: a slice of equal values
// centres to exactly 0 however its sums are accumulated, where sum(x) / n could round away from x (compiled f32
// sums) or overflow (sum(x) of values near the dtype's maximum). `x` is floating (f32 or f64 compute dtype).
struct Centred {
  Tensor centred, mean;
};
Centred centre_over(const Tensor& x, const std::vector<int64_t>& dims);

// Undefined unless `needed` (VJPs skip work for inputs that need no gradient).
template <class F>
Tensor if_needed(bool needed, F f) { return needed ? f() : Tensor(); }

}  // namespace kiln
