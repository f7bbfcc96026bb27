// `kiln minify G --oracle torch` (issue 37): PyTorch's torch.compile judges each candidate, so a PyTorch user's
// compiler bug (a graph `kiln import` read from a torch.export archive) minifies with kiln's reducer and ends in a
// script that reproduces it with nothing but torch installed.
//
// A CandidateRunner (command_oracle.h) for CommandOracle, which keeps the flakiness gate, the batches and the
// comparison with the target. Each candidate's directory holds candidate.kir, its inputs as .npy and
// candidate.py, the graph as `--emit torch` writes it (one torch.ops.aten call per node); candidate.py's judge()
// runs eager, compiles with the backend (a torch.compile backend's name, or FILE.py:FUNCTION, a function of a
// torch.fx.GraphModule and example inputs; on a PyTorch without torch.compile, 1.13, the function is given the
// module as torch.fx traces it) and classifies by kiln's kinds: an exception from the backend is a compile error,
// one from the compiled call a runtime error, outputs that differ from eager by PyTorch's same() rule with an fp64
// reference an accuracy failure. A graph whose eager run fails is not the compiler's failure (it passes).
//
// Up to -j persistent workers (minifier/torch_worker.py, compiled in and run with `PYTHON -c`): each imports
// torch once, at start, and is fed candidate directories over a pipe. A worker that dies mid-candidate is a crash
// (`the PyTorch worker was killed by signal 6 (SIGABRT)`), one that runs past --timeout is killed with everything
// it started and is a hang; either is restarted for the next candidate. A worker that cannot start (no torch for
// that Python) or cannot load the backend is bad input (exit 2, with what it said).
#pragma once
#include <memory>
#include <string>

#include "minifier/command_oracle.h"
#include "minifier/minifier.h"

namespace kiln::minify {

std::shared_ptr<CandidateRunner> make_torch_runner(const MinifyOptions::Torch& torch, double timeout_s, int jobs,
                                                   const std::string& work_dir);

// The workers a runner from make_torch_runner has started so far (0 for another runner).
int torch_worker_starts(const CandidateRunner& runner);

}  // namespace kiln::minify
