// Tests' shorthand for the failure oracle (repro/oracle.h): classify `g` on `backend` with `inputs`.
#pragma once
#include <string>
#include <vector>

#include "repro/oracle.h"

namespace kiln {

inline FailureSignature classify_on(const std::string& backend, const graph::Graph& g, const std::vector<Tensor>& inputs,
                                    double timeout_s, double tolerance = 1e-4) {
  OracleOptions o;
  o.backend = backend;
  o.tolerance = tolerance;
  o.timeout_s = timeout_s;
  return FailureOracle(o).classify(g, inputs);
}

}  // namespace kiln
