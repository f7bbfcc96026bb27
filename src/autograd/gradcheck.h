// gradcheck: compares the gradients autograd computes (the VJPs) with central finite differences in f64.
// Used by the property tests over the op table, and available to users checking their own functions.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "eager/tensor.h"

namespace kiln {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  uint64_t seed = 0;  // for the random output projections
};

struct GradcheckResult {
  bool ok = true;
  std::string message;  // on failure: which input, which element, analytic vs numerical
  double max_abs_error = 0;
};

using DiffFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Checks d(sum_i <f(inputs)_i, v_i>)/d(inputs) for random projections v_i. Inputs that require grad (must be
// f64) are checked; others are passed through. Inputs may be non-contiguous. Outputs that are not floating
// point are ignored.
GradcheckResult gradcheck(const DiffFn& f, const std::vector<Tensor>& inputs, const GradcheckOptions& opts = {});

}  // namespace kiln
