// The one comparator (decision 6) used by tests, `kiln run --check`, the minifier, bisector, fuzzer and CI
// gating. A compiled output passes when it is allclose to eager's, or when its RMSE against an fp64
// reference is at most m x eager's RMSE against that reference (+ tol/10): PyTorch's `same()` rule.
// What "eager" and "fp64" are for a graph is decided in one place, comparison_baselines() below: every tool
// that judges a backend's outputs gets both from it.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "eager/philox.h"
#include "eager/tensor.h"
#include "graph/graph.h"

namespace kiln {

struct CompareOptions {
  double tol = 1e-4;            // atol = rtol = tol for allclose (PyTorch tests: 1e-4; its minifier: 1e-3)
  bool equal_nan = true;
  bool ignore_non_float = false;  // the accuracy minifier's default: integer/bool outputs are not compared
};

// How one output compared. `rule` names what decided: "allclose", "rmse", "nan", "exact", "shape", "dtype",
// "ignored" (non-float output under ignore_non_float).
struct OutputVerdict {
  bool ok = true;
  std::string rule;
  double max_abs_error = 0, max_rel_error = 0;
  int64_t worst_index = -1;          // row-major index of the largest absolute error
  double expected_at_worst = 0, actual_at_worst = 0;
  int64_t mismatched = 0;            // elements outside atol + rtol*|expected|
  int64_t numel = 0;
  double rmse_actual = NAN, rmse_expected = NAN, multiplier = NAN;  // the RMSE rule's figures, when used
  double rmse_slack = 0;                                            // the rule's `+ tol / 10`
  double rmse_allowed() const { return multiplier * rmse_expected + rmse_slack; }
  std::string detail;                // e.g. "dtype f32 vs f16"
};

struct CompareVerdict {
  bool ok = true;
  std::vector<OutputVerdict> outputs;
  int first_failure() const;
  std::string str() const;  // the one printed form every tool uses
};

// Same dtype, same sizes and the same bytes element for element (bit-for-bit equality: NaN payloads and -0 count).
bool same_bits(const Tensor& a, const Tensor& b);

// expected: eager (or reference-backend) outputs; actual: outputs under test; fp64: the same graph run in
// f64 (may be empty: then only allclose/exact rules apply).
CompareVerdict compare_outputs(const std::vector<Tensor>& expected, const std::vector<Tensor>& actual,
                               const std::vector<Tensor>& fp64 = {}, const CompareOptions& opts = {});

// The two runs of the reference interpreter a backend's outputs are judged against (decision 6):
// - eager: `g` at its own dtypes, exactly as eager mode runs it (a bf16 graph rounds every intermediate to
//   bf16). PyTorch's `same()` measures eager's error in the graph's own precision, and the backend may be m
//   times as far from fp64; the fp64 reference rounded to each output's dtype would allow only the error of
//   one final rounding, and fail correct low-precision graphs of two or more ops (issue 21). Only where the
//   eager run itself fails (a kernel that refuses a dtype the fp64 run never sees) is eager the fp64
//   reference rounded to the graph's output dtypes: the best answer those dtypes can hold.
// - fp64: `g` with every floating value in f64 (InterpretOptions::fp64); when it fails (kiln::Error from the
//   interpreter) the graph cannot show a backend bug.
// Both start random ops from `random_state` (default: the generator's state now) and run on copies of
// `inputs`.
struct ComparisonBaselines {
  std::vector<Tensor> eager, fp64;
};
ComparisonBaselines comparison_baselines(const graph::Graph& g, const std::vector<Tensor>& inputs,
                                         std::optional<GeneratorState> random_state = std::nullopt);
// The fp64 half alone.
std::vector<Tensor> fp64_reference(const graph::Graph& g, const std::vector<Tensor>& inputs,
                                   std::optional<GeneratorState> random_state = std::nullopt);
// The eager half, for callers that already hold `g`'s fp64 reference outputs (the minifier's recorded values).
std::vector<Tensor> eager_baseline(const graph::Graph& g, const std::vector<Tensor>& inputs,
                                   const std::vector<Tensor>& fp64,
                                   std::optional<GeneratorState> random_state = std::nullopt);

// compare_outputs against both baselines.
CompareVerdict compare_to_baselines(const ComparisonBaselines& b, const std::vector<Tensor>& actual,
                                    const CompareOptions& opts = {});

}  // namespace kiln
