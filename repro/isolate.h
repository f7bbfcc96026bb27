// Runs a piece of work in a forked child so that a crash, an abort or a hang is a result rather than the end
// of the calling tool (decision 8). The child reports a short text back through a pipe. Children die with the
// process that forked them (PR_SET_PDEATHSIG: a SIGKILL, SIGINT or SIGTERM of the tool leaves none running),
// and each leads its own process group, so killing a hung child kills whatever it started too.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "repro/failure.h"

namespace kiln {

// What a child came back with. `kind` is one of: None (the body returned: `payload` is its text),
// RuntimeError (the body threw: the message), Crash (killed by a signal: its name; or no result), Hang (past its
// time limit). classify() (failure.h) turns it into a failure signature.
struct IsolatedResult {
  FailureKind kind = FailureKind::None;
  std::string payload;
  int signal = 0;
  double seconds = 0;      // from the fork until the result came (or the child was killed)
  double run_seconds = 0;  // the part of `seconds` after the setup step (isolated_run_starts); all of it without one
};

// Time limits. `timeout_s` is how long a body may run before it counts as a hang. A body with a setup step
// that is not what is being judged (compiling a graph, whose time depends on the kernel cache, before running
// it) is given `setup_s` for that step when setup_s > 0: it calls isolated_run_starts() when the step is done,
// and `timeout_s` counts from there. A child still in its setup step after `setup_s` is a Hang too. With
// setup_s = 0, `timeout_s` counts from the fork. Both must be positive and finite (else kiln::Error).
// The generous limit of a setup step for a run limit of `timeout_s`: 120 s, or 10x `timeout_s`.
double setup_limit_for(double timeout_s);
// In a forked child of run_isolated*: the setup step is done, the timed run starts now. No-op elsewhere.
void isolated_run_starts();

// Forks; the child runs `body` and sends its return value (or the message of a thrown exception) back.
// A child killed by a signal is a Crash; one still running after `timeout_s` is killed and reported as a Hang.
// The child computes on one thread (OpenMP and OpenBLAS thread pools do not survive fork()).
IsolatedResult run_isolated(const std::function<std::string()>& body, double timeout_s, double setup_s = 0);
// The same for many bodies, at most `jobs` children at a time, each with its own time limit; results in order.
// `on_result` (when set) is called with each body's index and result as it comes, in the order they finish.
std::vector<IsolatedResult> run_isolated_many(const std::vector<std::function<std::string()>>& bodies, int jobs,
                                              double timeout_s, double setup_s = 0,
                                              const std::function<void(size_t, const IsolatedResult&)>& on_result = nullptr);
// run_isolated, with `beside` running in this process while the child runs (so the two overlap on a
// machine with a second core); returns when both are done. The child's time limit counts from its start; one
// still without a result when it passes (while `beside` runs) is killed once `beside` returns. An exception
// from `beside` propagates after the child was killed and reaped.
IsolatedResult run_isolated_beside(const std::function<std::string()>& body, double timeout_s,
                                   const std::function<void()>& beside, double setup_s = 0);

}  // namespace kiln
