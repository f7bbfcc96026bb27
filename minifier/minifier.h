// kiln's minifier (issue 5, docs/minifier.md): shrinks a graph that fails on a backend to a minimal graph
// that fails the same way, and writes it as a repro file that `kiln repro run` reproduces.
//
//   1. Record every value of one fp64 reference run (values.h), within the memory budget, spilling beyond;
//      meanwhile a forked child runs the original on the backend once with a generous time limit (filling a
//      compiling backend's kernel cache).
//   2. Classify the original graph on the backend in a forked child, against its fp64 reference (the warm-up
//      run already classifies an original that fails with an error or a crash). It must fail ("does not
//      fail ... nothing to minify" otherwise); with accuracy=true the failure must be an accuracy failure.
//      That failure is the target (oracle.h: same-failure rules).
//   3. Reduce (reducer.h) with a ForkOracle. After every accepted step the smallest failing graph so far is
//      written to the checkpoint (a repro file, its inputs as .npy beside it, and a small state file), so an
//      interrupted run loses nothing and `resume` continues from it: the reduction depends only on the current
//      graph, so a resumed run ends where the uninterrupted one would have.
//   4. Re-verify: the result is written as a repro file, read back and reproduced (`kiln repro run`'s code).
#pragma once
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "minifier/oracle.h"
#include "minifier/reducer.h"
#include "repro/repro.h"

namespace kiln::minify {

struct MinifyOptions {
  std::string backend = "eager";
  bool accuracy = false;         // minify an accuracy failure (errors and crashes do not count)
  bool strict_accuracy = false;  // ... comparing non-float outputs too (implies accuracy)
  std::string check_str;         // errors match by this substring instead of the normalised message
  // Judge outputs then gradients (a graph with inputs marked `grad`, repro/training.h); the repro records
  // `check: gradients`, so `kiln repro run` checks the same.
  bool gradients = false;
  int jobs = 1;                  // candidates run in parallel
  double timeout_s = 10;         // per candidate; longer counts as a hang
  double tolerance = 1e-4;       // the comparator's tolerance for accuracy failures
  int64_t memory_budget = int64_t(256) << 20;  // bytes of recorded values kept in memory
  std::string spill_dir;         // where recorded values beyond the budget go (empty: system temp dir)
  // The repro file to write (and checkpoint to) after every accepted step; inputs go to OUT.inputs/ and the
  // run's state to OUT.state.json. Empty: nothing is written.
  std::string output;
  bool resume = false;           // continue from `output`'s checkpoint (written by an interrupted run)
  bool progress = false;         // a progress line on stderr (nodes left, oracle calls, elapsed)
  std::map<std::string, std::string> config;  // non-default options, recorded in the repro
  int max_steps = -1;            // stop after this many accepted steps (simulates an interruption)
  bool shape_moves = true;       // shrink sizes and make floating inputs f32 where the failure stays (reducer.h)
  uint64_t source_hash = 0;      // identifies the original graph + inputs, to refuse resuming another run
  // An external oracle (command_oracle.h): the shell command that judges each candidate instead of a backend.
  // `output` is then a directory (the result as the command saw it: candidate.kir and its inputs); backend,
  // accuracy, gradients, tolerance, resume and config do not apply.
  std::string command;
  int reruns = 3;                // runs of the original and of the result with a command (its flakiness gate)
  // `--oracle torch` (torch_oracle.h): PyTorch's torch.compile judges each candidate; runs as a command does.
  struct Torch {
    bool enabled = false;
    std::string backend = "inductor";  // a torch.compile backend's name, or FILE.py:FUNCTION (made absolute)
    std::string python = "python3";    // the Python that has torch (looked up on PATH)
  } torch;
};

// With a command: how often it agreed with itself.
struct CommandSummary {
  int original_runs = 0, original_failures = 0;  // runs of the original, and those showing the target
  int final_runs = 0, final_failures = 0;        // the same for the result
  int confirmations = 0, flips = 0;              // re-runs of accepted candidates, and those that disagreed
  std::string reproduce_line;                    // runs the command on the result directory by hand
  int worker_starts = 0;                         // --oracle torch: PyTorch workers started (one per -j slot,
                                                 // again after each crash or hang)
};

struct MinifyResult {
  graph::Graph graph;            // the minified graph (values keep their original names)
  std::vector<Tensor> inputs;    // its inputs
  FailureSignature original;     // the original graph's failure (the target)
  FailureSignature failure;      // the minified graph's failure, as re-verified
  ReduceStats stats;
  bool reverified = false;       // the written repro reproduced (or, without output, confirm() held)
  std::string reverify_message;  // what `kiln repro run` said (with a command: how many of its runs failed)
  CommandSummary command;        // with a command only
};

MinifyResult minify(const graph::Graph& g, const std::vector<Tensor>& inputs, const MinifyOptions& opts);

// The options that differ from their defaults and change what a backend does (KILN_INJECT, ...), as
// NAME=VALUE pairs for a repro's config; tool settings (logs, debug dir, repro hooks) are left out. The same
// set the reproduce lines carry (repro/command.h settings_in_effect, which this returns).
std::map<std::string, std::string> current_config();

// Writes `g` with `inputs` as a repro file at `path` (inputs as DIR/<name>.npy in `path`.inputs/, hashed);
// `gradients`: the failure is of a training run's outputs and gradients (`check: gradients`).
void write_repro_with_inputs(const graph::Graph& g, const std::vector<Tensor>& inputs, const std::string& backend,
                             const FailureSignature& failure, const std::map<std::string, std::string>& config,
                             double tolerance, const std::string& path, bool gradients = false);

// Removes the .npy files in `dir` other than `keep`, then `dir` itself if that left it empty. Only what the
// minifier writes there goes: anything else a user keeps in a directory of that name stays.
void remove_input_files(const std::filesystem::path& dir, const std::set<std::string>& keep);

// The reducer's options every run of minify() shares: its step limit, whether the shape moves are on, and the
// constant move's values (inputs of at most kConstantLimit elements that need no gradient, from `src`).
ReduceOptions shared_reduce_options(const MinifyOptions& o, const InputSource& src);

// The run of minify() with an external command or PyTorch as the oracle (minify_command.cpp).
MinifyResult minify_with_command(const graph::Graph& g, const std::vector<Tensor>& inputs, const MinifyOptions& opts);

// Content hash of a graph and its inputs (for the checkpoint's state file).
uint64_t source_hash(const graph::Graph& g, const std::vector<Tensor>& inputs);

}  // namespace kiln::minify
