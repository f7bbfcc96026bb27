// Runs a piece of work in a forked child so that a crash, an abort or a hang is a result rather than the end
// of the calling tool (decision 8). The child reports a short text back through a pipe.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace kiln {

struct IsolatedResult {
  enum class Kind { Ok, Error, Crash, Hang } kind = Kind::Ok;
  std::string payload;  // Ok: what the body returned; Error: the kiln::Error message; Crash: the signal name
  int signal = 0;
  double seconds = 0;   // from the fork until the result came (or the child was killed)
};

// Forks; the child runs `body` and sends its return value (or the message of a thrown exception) back.
// A child killed by a signal is a Crash; one still running after `timeout_s` is killed and reported as a Hang.
// The child computes on one thread (OpenMP and OpenBLAS thread pools do not survive fork()).
IsolatedResult run_isolated(const std::function<std::string()>& body, double timeout_s);
// The same for many bodies, at most `jobs` children at a time, each with its own time limit; results in order.
std::vector<IsolatedResult> run_isolated_many(const std::vector<std::function<std::string()>>& bodies, int jobs,
                                              double timeout_s);
// run_isolated, with `beside` running in this process while the child runs (so the two overlap on a
// machine with a second core); returns when both are done. The child's time limit counts from its start; one
// still without a result when it passes (while `beside` runs) is killed once `beside` returns. An exception
// from `beside` propagates after the child was killed and reaped.
IsolatedResult run_isolated_beside(const std::function<std::string()>& body, double timeout_s,
                                   const std::function<void()>& beside);

}  // namespace kiln
