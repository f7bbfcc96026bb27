// The comparator: allclose, then PyTorch's fp64 RMSE-multiplier rule, with explicit NaN rules and exact
// comparison for integer and bool outputs (torch/_dynamo/utils.py `same`).
#include "graph/compare.h"

#include <cmath>
#include <cstring>
#include <optional>

#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "ops/api.h"

namespace kiln {

namespace {

double rmse(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.empty()) return 0.0;
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = a[i] == b[i] ? 0.0 : a[i] - b[i];  // equal infinities differ by 0, not NaN
    s += d * d;
  }
  return std::sqrt(s / double(a.size()));
}

// PyTorch's multiplier: 3 for low precision, small tensors or loose tolerances; 2 otherwise.
double rmse_multiplier(DType dt, int64_t numel, double tol) {
  if (is_low_precision(dt) || numel < 1000 || tol >= 2e-2) return 3.0;
  return 2.0;
}

// The verdict when the two outputs cannot be compared element by element (an undefined output, another shape,
// another dtype, or a non-float output the options ignore); nullopt when they can.
std::optional<OutputVerdict> structural_verdict(const Tensor& expected, const Tensor& actual, const CompareOptions& o) {
  OutputVerdict v;
  v.numel = actual.defined() ? actual.numel() : 0;
  if (!expected.defined() || !actual.defined()) {
    v.ok = expected.defined() == actual.defined();
    v.rule = "shape";
    v.detail = v.ok ? "both undefined" : "one output is undefined";
    return v;
  }
  if (expected.sizes() != actual.sizes()) {
    v.ok = false;
    v.rule = "shape";
    v.detail = fmt::format("shape {} vs {}", shape_str(expected.sizes()), shape_str(actual.sizes()));
    return v;
  }
  if (!is_floating(expected.dtype()) && o.ignore_non_float) {
    v.rule = "ignored";
    return v;
  }
  if (expected.dtype() != actual.dtype()) {
    v.ok = false;
    v.rule = "dtype";
    v.detail = fmt::format("dtype {} vs {}", dtype_name(expected.dtype()), dtype_name(actual.dtype()));
    return v;
  }
  return std::nullopt;
}

// Element by element: the largest absolute and relative errors, where the worst one is, and how many elements
// lie outside allclose's tolerance (non-float outputs: any difference).
void count_mismatches(const std::vector<double>& e, const std::vector<double>& a, bool float_out,
                      const CompareOptions& o, OutputVerdict& v) {
  for (size_t i = 0; i < e.size(); ++i) {
    bool both_nan = std::isnan(e[i]) && std::isnan(a[i]);
    bool same_inf = std::isinf(e[i]) && e[i] == a[i];
    double err = both_nan || same_inf ? 0.0 : std::abs(e[i] - a[i]);
    if (std::isnan(err)) err = INFINITY;
    double rel = err == 0 ? 0.0 : err / std::max(std::abs(e[i]), 1e-300);
    if (err > v.max_abs_error || (v.worst_index < 0 && err > 0)) {
      v.max_abs_error = err;
      v.worst_index = int64_t(i);
      v.expected_at_worst = e[i];
      v.actual_at_worst = a[i];
    }
    v.max_rel_error = std::max(v.max_rel_error, rel);
    double allowed = float_out && std::isfinite(e[i]) ? o.tol + o.tol * std::abs(e[i]) : 0.0;
    if (both_nan && !o.equal_nan) err = INFINITY;
    if (err > allowed) ++v.mismatched;
  }
}

// The fp64 rule for a float output allclose refused: NaN positions first, then the RMSE of compiled against
// fp64 within the multiplier of eager's.
void judge_against_fp64(const std::vector<double>& e, const std::vector<double>& a, const std::vector<double>& r,
                        DType dtype, const CompareOptions& o, OutputVerdict& v) {
  // NaN positions first, element by element: compiled must keep every NaN eager and fp64 agree on and add none
  // that neither has; where only eager has a NaN (eager's problem, not the compiler's), compiled must be near
  // fp64. A NaN in one element must not hide the others: the RMSE rule then runs over the elements without a
  // NaN anywhere (one agreed NaN would otherwise make both RMSEs NaN and pass any other difference).
  int64_t lost = 0, added = 0, agreed = 0, far_from_fp64 = 0, eager_only = 0;
  std::vector<double> rc, ec, ac;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool rn = std::isnan(r[i]), en = std::isnan(e[i]), an = std::isnan(a[i]);
    if (rn && en) {
      (an ? agreed : lost) += 1;
    } else if (an) {
      if (!rn && !en) ++added;
    } else if (en) {
      ++eager_only;
      if (!(std::abs(a[i] - r[i]) <= 4e-2 + 4e-2 * std::abs(r[i]))) ++far_from_fp64;
    } else if (!rn) {
      rc.push_back(r[i]);
      ec.push_back(e[i]);
      ac.push_back(a[i]);
    }
  }
  if (lost || added || far_from_fp64 || (agreed && !o.equal_nan)) {
    v.ok = false;
    v.rule = "nan";
    v.detail = lost ? fmt::format("{} NaN(s) of eager and fp64 are numbers in compiled", lost)
               : added ? fmt::format("{} NaN(s) in compiled where eager and fp64 have numbers", added)
               : far_from_fp64 ? "eager has NaN; compiled is far from fp64"
                               : "NaNs agree but equal_nan is off";
    return;
  }
  v.rmse_expected = rmse(rc, ec);
  v.rmse_actual = rmse(rc, ac);
  v.multiplier = rmse_multiplier(dtype, v.numel, o.tol);
  v.rmse_slack = o.tol / 10.0;
  if (eager_only && v.rmse_actual <= v.rmse_allowed()) {
    v.rule = "nan";
    v.detail = "eager has NaN; compiled matches the fp64 reference";
    return;
  }
  v.rule = "rmse";
  v.ok = v.rmse_actual <= v.rmse_allowed();
}

OutputVerdict compare_one(const Tensor& expected, const Tensor& actual, const Tensor& fp64, const CompareOptions& o) {
  if (std::optional<OutputVerdict> structural = structural_verdict(expected, actual, o)) return *structural;
  OutputVerdict v;
  v.numel = actual.numel();
  const bool float_out = is_floating(expected.dtype());
  const std::vector<double> e = expected.to_double_vector(), a = actual.to_double_vector();
  count_mismatches(e, a, float_out, o, v);
  if (!float_out) {
    v.rule = "exact";
    v.ok = v.mismatched == 0;
  } else if (v.mismatched == 0) {
    v.rule = "allclose";
  } else if (!fp64.defined()) {
    v.ok = false;
    v.rule = "allclose";
    v.detail = "no fp64 reference to apply the RMSE rule";
  } else {
    judge_against_fp64(e, a, fp64.to_double_vector(), actual.dtype(), o, v);
  }
  return v;
}

}  // namespace

CompareVerdict compare_outputs(const std::vector<Tensor>& expected, const std::vector<Tensor>& actual,
                               const std::vector<Tensor>& fp64, const CompareOptions& opts) {
  KILN_CHECK(expected.size() == actual.size(), "compare: {} expected outputs but {} actual ones", expected.size(),
             actual.size());
  KILN_CHECK(fp64.empty() || fp64.size() == expected.size(), "compare: {} fp64 outputs for {} outputs", fp64.size(),
             expected.size());
  CompareVerdict verdict;
  for (size_t i = 0; i < expected.size(); ++i) {
    OutputVerdict v = compare_one(expected[i], actual[i], fp64.empty() ? Tensor() : fp64[i], opts);
    verdict.ok &= v.ok;
    verdict.outputs.push_back(std::move(v));
  }
  return verdict;
}

namespace {

std::vector<Tensor> interpret(const graph::Graph& g, const std::vector<Tensor>& inputs, bool fp64,
                              std::optional<GeneratorState> random_state) {
  if (random_state) default_generator() = *random_state;
  graph::InterpretOptions o;
  o.fp64 = fp64;
  NoGradGuard no_grad;
  return graph::run_graph(g, graph::copy_inputs(inputs), o);
}

}  // namespace

std::vector<Tensor> fp64_reference(const graph::Graph& g, const std::vector<Tensor>& inputs,
                                   std::optional<GeneratorState> random_state) {
  return interpret(g, inputs, true, random_state);
}

std::vector<Tensor> eager_baseline(const graph::Graph& g, const std::vector<Tensor>& inputs,
                                   const std::vector<Tensor>& fp64, std::optional<GeneratorState> random_state) {
  try {
    return interpret(g, inputs, false, random_state);
  } catch (const Error&) {  // eager cannot run it: the fp64 answer in the dtypes the graph promises
    std::vector<Tensor> rounded;
    for (size_t i = 0; i < fp64.size() && i < g.outputs().size(); ++i)
      rounded.push_back(fp64[i].defined() ? to(fp64[i], g.value(g.outputs()[i]).meta.dtype) : fp64[i]);
    return rounded;
  }
}

ComparisonBaselines comparison_baselines(const graph::Graph& g, const std::vector<Tensor>& inputs,
                                         std::optional<GeneratorState> random_state) {
  if (!random_state) random_state = default_generator();  // both runs draw the same numbers
  ComparisonBaselines b;
  b.fp64 = fp64_reference(g, inputs, random_state);
  b.eager = eager_baseline(g, inputs, b.fp64, random_state);
  return b;
}

CompareVerdict compare_to_baselines(const ComparisonBaselines& b, const std::vector<Tensor>& actual,
                                    const CompareOptions& opts) {
  return compare_outputs(b.eager, actual, b.fp64, opts);
}

int CompareVerdict::first_failure() const {
  for (size_t i = 0; i < outputs.size(); ++i)
    if (!outputs[i].ok) return int(i);
  return -1;
}

std::string CompareVerdict::str() const {
  std::string s = ok ? "PASS" : "FAIL";
  for (size_t i = 0; i < outputs.size(); ++i) {
    const OutputVerdict& v = outputs[i];
    s += fmt::format("\n  output {}: {} by {}", i, v.ok ? "pass" : "FAIL", v.rule);
    if (!v.detail.empty()) s += " (" + v.detail + ")";
    if (v.rule == "ignored" || v.rule == "shape" || v.rule == "dtype") continue;
    s += fmt::format("; max abs error {:.3g}, max rel error {:.3g}, {} of {} elements outside tolerance", v.max_abs_error,
                     v.max_rel_error, v.mismatched, v.numel);
    if (v.worst_index >= 0)
      s += fmt::format("; worst at [{}]: expected {:.9g}, got {:.9g}", v.worst_index, v.expected_at_worst,
                       v.actual_at_worst);
    if (v.rule == "rmse")
      s += fmt::format("; RMSE vs fp64 {:.3g} (allowed {:.3g} = {} x eager's {:.3g} + tol/10 {:.3g})", v.rmse_actual,
                       v.rmse_allowed(), v.multiplier, v.rmse_expected, v.rmse_slack);
  }
  return s;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;  // (an empty tensor may have no memory: no memcmp of null)
  Tensor ca = contiguous(a), cb = contiguous(b);
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), size_t(ca.numel() * dtype_size(ca.dtype()))) == 0;
}

}  // namespace kiln
