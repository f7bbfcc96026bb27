// Re-running a repro file: builds its inputs, applies its configuration, and asks the failure oracle
// (oracle.h) what the graph shows on its backend now: compile_error, runtime_error, crash, hang, accuracy (the
// comparator against fp64), or none; then whether that is the recorded failure (same_failure, failure.h).
#pragma once
#include <string>
#include <vector>

#include "api/backends.h"
#include "repro/oracle.h"
#include "repro/repro.h"

namespace kiln {

// Backends a repro can name come from the one registry (api/backends.h).

struct ReproOutcome {
  FailureSignature observed;
  bool reproduces = false;  // observed is the recorded failure (same_failure)
};

// The inputs a repro describes (seed, or .npy files relative to the repro's directory, hash-checked).
std::vector<Tensor> repro_inputs(const ReproFile& r, const std::string& repro_path);

ReproOutcome reproduce(const ReproFile& r, const std::string& repro_path, double timeout_s);

}  // namespace kiln
