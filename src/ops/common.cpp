// Type promotion (c10 ResultTypeState), the checked conversion of numbers to dtypes (check_fits), reduction-dim
// normalisation, and sum_to.
#include "ops/common.h"

#include <algorithm>
#include <cmath>

namespace kiln {

namespace {
struct ResultTypeState {
  std::optional<DType> dim, zero, wrapped;
};
std::optional<DType> promote_opt(std::optional<DType> a, DType b) { return a ? promote_types(*a, b) : b; }

// combine_categories from c10: the higher-priority result wins unless the lower one is of a higher category.
std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_floating(*higher)) return higher;
  if (*higher == DType::Bool || is_floating(*lower)) return promote_types(*higher, *lower);
  return higher;
}

// Over any range of tensors (a vector, or an initializer_list without copying it into one).
template <class Range>
DType result_type_of(const Range& tensors) {
  ResultTypeState s;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    DType current = t.dtype();
    if (t.is_wrapped_number()) {
      if (is_floating(current)) current = kDefaultFloat;
      s.wrapped = promote_opt(s.wrapped, current);
    } else if (t.dim() > 0) {
      s.dim = promote_opt(s.dim, current);
    } else {
      s.zero = promote_opt(s.zero, current);
    }
  }
  auto r = combine(s.dim, combine(s.zero, s.wrapped));
  KILN_CHECK(r.has_value(), "result_type: no tensors given");
  return *r;
}
}  // namespace

DType result_type(const std::vector<Tensor>& tensors) { return result_type_of(tensors); }
DType result_type(std::initializer_list<Tensor> tensors) { return result_type_of(tensors); }

void check_fits(const Scalar& v, DType dt, std::string_view op) {
  if (dt == DType::Bool || dt == DType::F64) return;
  double d = v.to_double();
  if (dt == DType::I64) {  // every int fits; a float must lie in [-2^63, 2^63) (and not be NaN)
    KILN_CHECK(!v.is_float() || (d >= -9223372036854775808.0 && d < 9223372036854775808.0), "{}: value {} cannot be "
               "converted to type i64 without overflow (its range is [-9223372036854775808, 9223372036854775807])",
               op, v.str());
    return;
  }
  double lo, hi;
  switch (dt) {
    case DType::F16: lo = -65504.0, hi = 65504.0; break;
    case DType::BF16: lo = -3.3895313892515355e38, hi = 3.3895313892515355e38; break;
    case DType::F32: lo = -3.4028234663852886e38, hi = 3.4028234663852886e38; break;
    case DType::U8: lo = 0, hi = 255; break;
    case DType::I8: lo = -128, hi = 127; break;
    case DType::I16: lo = -32768, hi = 32767; break;
    case DType::I32: lo = -2147483648.0, hi = 2147483647.0; break;
    default: return;
  }
  if (is_floating(dt) && !std::isfinite(d)) return;
  KILN_CHECK(d >= lo && d <= hi, "{}: value {} cannot be converted to type {} without overflow (its range is [{}, {}])",
             op, v.str(), dtype_name(dt), lo, hi);
}

std::vector<int64_t> reduction_dims(const std::optional<IntList>& dims, int64_t ndim, std::string_view op,
                                    bool empty_means_all) {
  std::vector<int64_t> out;
  if (!dims || (dims->empty() && empty_means_all)) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : *dims) {
    int64_t w = wrap_dim(d, ndim, op);
    KILN_CHECK(std::find(out.begin(), out.end(), w) == out.end(), "{}: dim {} appears more than once in {}", op, w,
               shape_str(*dims));
    out.push_back(w);
  }
  std::sort(out.begin(), out.end());
  if (ndim == 0) out.clear();
  return out;
}

Shape reduced_shape(const Shape& sizes, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < int64_t(sizes.size()); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) out.push_back(sizes[size_t(d)]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.sizes() == shape) return grad;
  int64_t lead = grad.dim() - int64_t(shape.size());
  KILN_CHECK(lead >= 0, "sum_to: cannot reduce {} to {}", grad.str(), shape_str(shape));
  IntList dims;
  for (int64_t d = 0; d < lead; ++d) dims.push_back(d);
  for (int64_t d = 0; d < int64_t(shape.size()); ++d)
    if (shape[size_t(d)] == 1 && grad.sizes()[size_t(d + lead)] != 1) dims.push_back(d + lead);
  Tensor r = dims.empty() ? grad : sum(grad, dims, true);
  if (lead > 0 || r.sizes() != shape) r = view(contiguous(r), shape);
  return r;
}

Centred centre_over(const Tensor& x, const std::vector<int64_t>& dims) {
  const OptIntList mean_dims = dims.empty() ? OptIntList() : OptIntList(IntList(dims.begin(), dims.end()));
  Tensor first = x;
  for (int64_t d : dims.empty() ? reduction_dims(std::nullopt, x.dim(), "centre_over") : dims) {
    if (x.size(d) == 0) {  // empty slices: nothing to shift by
      Tensor m = mean(x, mean_dims, true);
      return {sub(x, m), m};
    }
    first = narrow(first, d, 0, 1);
  }
  const Tensor shifted = sub(x, first);
  const Tensor shifted_mean = mean(shifted, mean_dims, true);
  return {sub(shifted, shifted_mean), add(first, shifted_mean)};
}

}  // namespace kiln
