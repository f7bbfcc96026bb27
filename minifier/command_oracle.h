// The minifier's external oracle (issue 37, `kiln minify G --cmd CMD`): a user's shell command judges each
// candidate, as C-Reduce's and llvm-reduce's interestingness tests do. Each candidate is written into a
// directory of its own, `candidate.kir` with one `<input>.npy` per graph input beside it (so `kiln run
// candidate.kir --inputs .` reads them), and CMD runs there with `/bin/sh -c`, stdin from /dev/null,
// KILN_CANDIDATE naming the file and KILN_CANDIDATE_DIR the directory (absolute paths), inside a forked child
// of its own (repro/isolate.h: up to -j at once; a command past the time limit is killed with everything it
// started, and counts as a hang).
//
// What a run shows: exit status 0 passes; another status is a failure (`the command exited with status 1`); a
// signal is a crash (`the command was killed by signal 11 (SIGSEGV)`); past the limit, a hang. A candidate fails
// the same way as the original when it ends the same way (the same status or signal: a command that exits 2 for
// a graph it cannot read is not the bug that exits 1) and, with --check-str, its output (stdout and stderr)
// contains the string.
//
// The same oracle judges by another runner (CommandOracleOptions::runner, CandidateRunner below): PyTorch's
// workers for `--oracle torch`. Its outcomes are compared with the target by the failure rules (same_failure:
// messages modulo names and numbers, the same signal for a crash) rather than exactly.
//
// Commands may be nondeterministic. The original runs `reruns` times before the reduction (a failure seen in
// some runs and not in others stops the run: minifying noise gives nonsense); every candidate about to be
// accepted is run again (confirm) and a disagreement with its first run counts as a flip, rejecting it; the
// result runs `reruns` times again. The counts are in the summary.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "minifier/oracle.h"
#include "minifier/reducer.h"

namespace kiln::minify {

// What one run of the command did: its outcome as a failure signature (kind none: exit 0), and its output.
struct CommandRun {
  FailureSignature outcome;
  std::string output;  // stdout and stderr, the last 64 KiB
};

// How candidates are judged when not by a shell command: `--oracle torch`'s PyTorch workers (torch_oracle.h).
// The oracle keeps what both share: directories, batches, the flakiness gate and the comparison with the target.
class CandidateRunner {
 public:
  virtual ~CandidateRunner() = default;
  // Writes what the judge reads into DIR (created when missing).
  virtual void write(const graph::Graph& g, const std::vector<Tensor>& inputs, const std::string& dir) = 0;
  // Judges the candidates in DIRS (written by write), up to its own parallelism at once.
  virtual std::vector<CommandRun> run(const std::vector<std::string>& dirs) = 0;
  // The line that judges DIR's candidate by hand in a clean shell.
  virtual std::string reproduce_line(const std::string& dir) const = 0;
  // Who judges, for messages: "the command", "PyTorch (backend inductor)".
  virtual std::string judge_name() const = 0;
};

struct CommandOracleOptions {
  std::string command;        // run by /bin/sh -c in the candidate's directory
  std::shared_ptr<CandidateRunner> runner;  // instead of the command, when set
  std::string check_str;      // a failure counts only when the command's output contains this
  double timeout_s = 60;
  int jobs = 1;
  std::string work_dir;       // where the candidates' directories are made (a private temporary directory)
  FailureSignature target;    // the original's failure (set once classified)
};

class CommandOracle : public Oracle {
 public:
  CommandOracle(const InputSource& src, CommandOracleOptions opts);
  Verdict test(const Candidate& c) override;
  std::vector<std::optional<Verdict>> test_batch(const std::vector<const Candidate*>& batch) override;
  // A second run of the candidate; a verdict other than its first run's is a flip.
  Verdict confirm(const Candidate& c) override;
  int parallelism() const override { return opts_.jobs; }

  // Runs the command on `g` `times` times, one after the other (never in parallel: a flaky command that keeps
  // state between runs is seen as it is).
  std::vector<CommandRun> run_times(const graph::Graph& g, int times);
  void set_target(FailureSignature target) { opts_.target = std::move(target); }
  // The candidate as the judge sees it, written into DIR; the line that judges it there by hand; who judges.
  void write_candidate(const graph::Graph& g, const std::string& dir) const;
  std::string reproduce_line(const std::string& dir) const;
  std::string judge_name() const;
  // Whether a run shows the target failure.
  bool shows_target(const CommandRun& r) const;

  int confirmations() const { return confirmations_; }
  int flips() const { return flips_; }

 private:
  CommandRun run_one(const graph::Graph& g, const std::string& dir_name);
  std::vector<CommandRun> run_many(const std::vector<const graph::Graph*>& graphs);
  Verdict verdict(const CommandRun& r) const;

  const InputSource& src_;
  CommandOracleOptions opts_;
  std::unordered_map<uint64_t, bool> first_verdicts_;  // by candidate_key: what test() said
  int next_dir_ = 0;
  int confirmations_ = 0, flips_ = 0;
};

// Writes `g` and its inputs as a command sees a candidate: DIR/candidate.kir and DIR/<input>.npy (each file
// atomically; DIR is created when missing).
void write_candidate_directory(const graph::Graph& g, const std::vector<Tensor>& inputs, const std::string& dir);

// The line that runs the command on a candidate directory by hand, in a clean shell: `cd DIR && KILN_...=...
// KILN_CANDIDATE=DIR/candidate.kir KILN_CANDIDATE_DIR=DIR /bin/sh -c CMD` (every KILN_* setting in effect that
// changes what kiln computes, since the command may run kiln; each word shell-quoted; DIR made absolute).
std::string command_reproduce_line(const std::string& command, const std::string& dir);

}  // namespace kiln::minify
