// The one comparator (decision 6) used by tests, `kiln run --check`, the minifier, bisector, fuzzer and CI
// gating. A compiled output passes when it is allclose to eager's, or when its RMSE against an fp64
// reference is at most m x eager's RMSE against that reference (+ tol/10): PyTorch's `same()` rule.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "eager/tensor.h"

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

// expected: eager (or reference-backend) outputs; actual: outputs under test; fp64: the same graph run in
// f64 (may be empty: then only allclose/exact rules apply).
CompareVerdict compare_outputs(const std::vector<Tensor>& expected, const std::vector<Tensor>& actual,
                               const std::vector<Tensor>& fp64 = {}, const CompareOptions& opts = {});

}  // namespace kiln
