// Running gate entries: each entry in its own forked child (repro/isolate.h), so a crash or a hang fails that
// entry and not the run. A graph entry is judged by the same classification as `kiln repro run` (compile
// error, runtime error, crash, hang, or the comparator against the fp64 reference; with --grad or the entry's
// "grad", a graph with inputs marked `grad` on its outputs and then its gradients, as `kiln run --check --grad`
// judges them: a wrong VJP or partition changes only the gradients); a passing graph is then
// timed: `repetitions` cold compiles and `repetitions` warm calls, with the peak bytes the
// call allocates beyond its inputs. Each cold compile runs in a child of its own with an empty kernel cache.
// A repro entry passes when its recorded failure no longer happens.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gate/suite.h"

namespace kiln::gate {

// Status words: "pass", the failure kinds of repro files (compile_error, runtime_error, crash, hang,
// accuracy), "invalid" (the entry cannot be checked: unreadable file, failing fp64 reference) and "skipped".
struct Measurement {
  std::string status = "pass";
  std::string message;           // the error, signal, or comparator verdict
  std::vector<double> compile_ms;  // one cold compile per repetition; none without a compile step or on failure
  std::vector<double> run_ms;      // one per repetition
  int64_t peak_bytes = -1;         // bytes allocated at the peak of one call beyond its inputs; -1 unknown
  double seconds = 0;              // wall time of the whole entry
  bool gradients = false;          // judged on outputs then gradients (`kiln run --check --grad`; JSON "check")
  bool passed() const { return status == "pass"; }
};

struct RunConfig {
  std::string backend = "inductor";
  bool gradients = false;  // --grad: graphs with inputs marked `grad` are judged on their gradients too
  double tolerance = 1e-4;
  double timeout_s = 60;
  int repetitions = 5;
};

// `on_entry` (when set) is called with each entry's index and measurement as it is known: skipped entries first,
// then each run entry as its child finishes (`kiln gate`'s progress lines and incremental reports).
std::vector<Measurement> measure_suite(const Suite& suite, const RunConfig& config, int jobs,
                                       const std::function<void(size_t, const Measurement&)>& on_entry = nullptr);

nlohmann::json to_json(const Measurement& m);
Measurement measurement_from_json(const nlohmann::json& j, const std::string& where);
// Whether `status` is one of the status words above.
bool is_status_word(const std::string& status);

}  // namespace kiln::gate
