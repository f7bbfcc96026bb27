// Re-running a repro file: builds its inputs, applies its configuration, runs its graph on its backend in an
// isolated child (so a crash or hang is an answer), and classifies what happened with the same rules the
// minifier uses: compile_error, runtime_error, crash, hang, accuracy (the comparator against fp64), or none.
#pragma once
#include <functional>
#include <string>

#include "repro/repro.h"

namespace kiln {

// Backends a repro can name. "eager" (the reference interpreter) is always there; compiled backends register
// themselves, and tests register deliberately broken ones.
using BackendFn = std::function<std::vector<Tensor>(const graph::Graph&, const std::vector<Tensor>&)>;
void register_backend(const std::string& name, BackendFn fn);
std::vector<std::string> backend_names();
// The registered backend `name`; kiln::Error listing the available ones if there is none.
const BackendFn& backend_function(const std::string& name);

struct ReproOutcome {
  FailureSignature observed;
  bool reproduces = false;  // observed is the recorded failure (same_failure)
};

// The inputs a repro describes (seed, or .npy files relative to the repro's directory, hash-checked).
std::vector<Tensor> repro_inputs(const ReproFile& r, const std::string& repro_path);

// Runs `g` on `backend` with `inputs` and reports the failure it shows (kind "none" if it passes the
// comparator against the fp64 reference). Throws kiln::Error when the reference run itself fails: such a
// graph cannot show a backend bug.
FailureSignature classify_run(const graph::Graph& g, const std::vector<Tensor>& inputs, const std::string& backend,
                              double tolerance, double timeout_s);

ReproOutcome reproduce(const ReproFile& r, const std::string& repro_path, double timeout_s);

}  // namespace kiln
