// The loop-IR verifier: checks a schedule against the invariants the passes after it and the backends rely on,
// as the graph verifier (graph/verify.h) checks graphs. The pipeline (compile.cpp) runs it after every schedule
// pass when it is enabled: KILN_VERIFY (`auto`: builds without NDEBUG), and always in the test binary. A broken
// schedule is a compiler bug: the pipeline reports it as an internal error naming the pass that broke it.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "inductor/scheduler.h"

namespace kiln::inductor {

// Each broken invariant, as "<invariant>: what is wrong" with the invariant's name first (the names are those
// listed in docs/inductor.md, "The loop-IR verifier"); empty when the schedule is valid.
std::vector<std::string> schedule_problems(const Schedule& s, const LoweredGraph& lg);

// Throws an internal kiln::Error naming `after_pass` and every problem when the schedule is broken.
void verify_schedule(const Schedule& s, const LoweredGraph& lg, std::string_view after_pass);

// Whether the pipeline verifies schedules between passes: KILN_VERIFY, or on when forced (tests).
bool schedule_verifier_enabled();
void force_schedule_verifier(bool on);

}  // namespace kiln::inductor
