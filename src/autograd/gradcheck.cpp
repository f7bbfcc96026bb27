// Finite-difference gradient checking (like torch.autograd.gradcheck, with random output projections so the
// cost is one backward plus two forwards per input element).
#include "autograd/gradcheck.h"

#include <cmath>
#include <random>

#include "autograd/autograd.h"
#include "ops/api.h"

namespace kiln {
namespace {

// Address of element `linear` (row-major) of an f64 tensor, honouring strides.
double* element_ptr(const Tensor& t, int64_t linear) {
  int64_t off = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    int64_t s = t.sizes()[size_t(d)];
    off += (linear % s) * t.strides()[size_t(d)];
    linear /= s;
  }
  return t.data<double>() + off;
}

double projected(const std::vector<Tensor>& outs, const std::vector<Tensor>& vs) {
  double total = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!vs[i].defined()) continue;
    std::vector<double> o = to(outs[i], DType::F64).to_double_vector(), v = vs[i].to_double_vector();
    for (size_t k = 0; k < o.size(); ++k) total += o[k] * v[k];
  }
  return total;
}

}  // namespace

GradcheckResult gradcheck(const DiffFn& f, const std::vector<Tensor>& inputs, const GradcheckOptions& opts) {
  GradcheckResult result;
  std::vector<Tensor> diff_inputs;
  for (const Tensor& t : inputs) {
    if (!t.defined() || !t.requires_grad()) continue;
    KILN_CHECK(t.dtype() == DType::F64, "gradcheck: input {} requires grad but is not f64", t.str());
    KILN_CHECK(t.is_leaf(), "gradcheck: input {} must be a leaf", t.str());
    diff_inputs.push_back(t);
  }
  std::vector<Tensor> outs = f(inputs);
  std::mt19937_64 rng(opts.seed);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::vector<Tensor> vs(outs.size()), roots, root_grads;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].defined() || !is_floating(outs[i].dtype())) continue;
    std::vector<double> v(size_t(outs[i].numel()));
    for (double& x : v) x = uni(rng);
    vs[i] = Tensor::from_vector<double>(v, outs[i].sizes());
    if (outs[i].requires_grad()) {
      roots.push_back(outs[i]);
      root_grads.push_back(to(vs[i], outs[i].dtype()));
    }
  }
  std::vector<Tensor> analytic(diff_inputs.size());
  if (!roots.empty() && !diff_inputs.empty()) {
    // Inputs that no output depends on get no gradient; grad() reports those as undefined.
    analytic = grad(roots, diff_inputs, root_grads);
  }
  NoGradGuard no_grad;
  for (size_t j = 0; j < diff_inputs.size(); ++j) {
    const Tensor& x = diff_inputs[j];
    std::vector<double> a = analytic[j].defined() ? to(analytic[j], DType::F64).to_double_vector()
                                                  : std::vector<double>(size_t(x.numel()), 0.0);
    for (int64_t k = 0; k < x.numel(); ++k) {
      double* p = element_ptr(x, k);
      double orig = *p;
      *p = orig + opts.eps;
      double plus = projected(f(inputs), vs);
      *p = orig - opts.eps;
      double minus = projected(f(inputs), vs);
      *p = orig;
      double numeric = (plus - minus) / (2 * opts.eps);
      double err = std::abs(a[size_t(k)] - numeric);
      if (std::isnan(a[size_t(k)]) != std::isnan(numeric)) err = INFINITY;
      result.max_abs_error = std::max(result.max_abs_error, err);
      if (result.ok && err > opts.atol + opts.rtol * std::abs(numeric)) {
        result.ok = false;
        result.message = fmt::format("input {} ({}), element {}: analytic {} vs numerical {} (error {})", j, x.str(), k,
                                     a[size_t(k)], numeric, err);
      }
    }
  }
  return result;
}

}  // namespace kiln
