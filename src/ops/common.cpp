// Type promotion (c10 ResultTypeState), reduction-dim normalisation, and sum_to.
#include "ops/common.h"

#include <algorithm>

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
}  // namespace

DType result_type(const std::vector<Tensor>& tensors) {
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

DType result_type(std::initializer_list<Tensor> tensors) { return result_type(std::vector<Tensor>(tensors)); }

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

}  // namespace kiln
