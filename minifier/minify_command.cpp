// minify_with_command(): `kiln minify G --cmd CMD` and `--oracle torch`, the minifier with a user's command or
// PyTorch as the oracle (command_oracle.h, torch_oracle.h). The steps of minify() (minifier.h) where they apply:
// record the reference values (the window move's inputs carry them), run the original `reruns` times (the
// flakiness gate) and take its failure as the target, reduce with the same reducer and moves, writing the smallest
// failing candidate to the output directory after every accepted step, then run the result `reruns` times.
// There is no backend and no repro file: the output is the directory the judge sees (candidate.kir, its inputs;
// candidate.py for PyTorch), and the reproduce line runs the judge there.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>

#include "core/escape.h"
#include "core/files.h"
#include "core/seed.h"
#include "graph/inputs.h"
#include "minifier/command_oracle.h"
#include "minifier/minifier.h"
#include "minifier/torch_oracle.h"
#include "minifier/values.h"

namespace kiln::minify {

namespace fs = std::filesystem;

namespace {

// The last `n` lines of a command's output, for an error message.
std::string output_tail(const std::string& output, int n = 5) {
  size_t at = output.size();
  if (at && output[at - 1] == '\n') --at;
  for (int i = 0; i < n && at != std::string::npos && at > 0; ++i) at = output.rfind('\n', at - 1);
  std::string tail = output.substr(at == std::string::npos ? 0 : at + (output[at] == '\n'));
  while (!tail.empty() && tail.back() == '\n') tail.pop_back();
  return tail.empty() ? "(no output)" : tail;
}

// The output directory must be new, empty, or one this command wrote (it holds candidate.kir): a run
// rewrites only candidate.kir and the .npy files of its inputs there.
void check_output_directory(const std::string& dir) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dir, ec);
  if (!fs::exists(st)) return;
  KILN_CHECK(fs::is_directory(st), "-o {}: with --cmd or --oracle torch the output is a directory (candidate.kir "
             "and its inputs), and {} exists and is not one; name a new directory", dir, dir);
  KILN_CHECK(fs::is_empty(dir, ec) || fs::exists(fs::path(dir) / "candidate.kir"), "-o {}: the directory exists and "
             "holds files kiln minify --cmd or --oracle torch did not write (it has no candidate.kir); name a new or "
             "empty directory", dir);
}

class CommandMinifyRun {
 public:
  CommandMinifyRun(const graph::Graph& g, const std::vector<Tensor>& inputs, const MinifyOptions& o)
      : g_(g), inputs_(inputs), opts_(o), store_(o.memory_budget, o.spill_dir), src_(g, inputs, store_),
        work_(o.spill_dir, "kiln-minify-cmd-"), t0_(std::chrono::steady_clock::now()) {}

  MinifyResult run() {
    record_reference(g_, inputs_, default_generator(), store_);
    CommandOracleOptions co;
    co.command = opts_.command;
    co.check_str = opts_.check_str;
    co.timeout_s = opts_.timeout_s;
    co.jobs = opts_.jobs;
    co.work_dir = work_.path().string();
    if (opts_.torch.enabled) co.runner = make_torch_runner(opts_.torch, opts_.timeout_s, opts_.jobs, co.work_dir);
    CommandOracle oracle(src_, co);
    oracle_ = &oracle;
    classify_original(oracle);
    if (!opts_.output.empty()) remove_input_files(opts_.output, {});  // an earlier run's inputs
    checkpoint(g_);
    ReduceOptions ro = shared_reduce_options(opts_, src_);
    ro.on_accept = [this](const Candidate& c, const ReduceStats& s) {
      if (opts_.progress)
        std::fprintf(stderr, "kiln minify: %d of %d op nodes left | %d %s | %.1f s | %s\n", s.ops, s.start_ops,
                     s.oracle_calls, opts_.torch.enabled ? "PyTorch runs" : "command runs", s.seconds,
                     terminal_safe(c.move).c_str());
      checkpoint(c.graph);
    };
    stats_.start_ops = std::get<0>(measure(g_));
    Candidate out = reduce(Candidate{g_, "original"}, oracle, ro, stats_);
    reverify(out, oracle);
    if (co.runner) res_.command.worker_starts = torch_worker_starts(*co.runner);
    oracle_ = nullptr;
    res_.stats = stats_;
    res_.stats.ops = std::get<0>(measure(res_.graph));
    res_.stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    return res_;
  }

 private:
  // The flakiness gate: `reruns` runs of the original, one after another. The first failure seen is the target;
  // every run must show it.
  void classify_original(CommandOracle& oracle) {
    std::vector<CommandRun> runs = oracle.run_times(g_, opts_.reruns);
    stats_.oracle_calls += int(runs.size());
    const CommandRun* first = nullptr;
    for (const CommandRun& r : runs)
      if (r.outcome.kind != FailureKind::None &&
          (opts_.check_str.empty() || r.output.find(opts_.check_str) != std::string::npos)) {
        first = &r;
        break;
      }
    const int n = int(runs.size());
    const std::string who = oracle.judge_name();
    if (!first) {
      const bool any_failure = std::any_of(runs.begin(), runs.end(),
                                           [](const CommandRun& r) { return r.outcome.kind != FailureKind::None; });
      KILN_CHECK(!any_failure, "--check-str: {} fails on the original graph, but its output never contains "
                 "\"{}\" ({} runs; the last: {}; its output ends:\n{})", who, opts_.check_str, n,
                 runs.back().outcome.message, output_tail(runs.back().output));
      if (opts_.torch.enabled)
        fail("{} passes the original graph in {} of {} runs: nothing to minify (a failure is a compile error, a "
             "runtime error, a crash, a hang past --timeout, or outputs that differ from eager by PyTorch's same() "
             "rule; a graph that fails in eager is not the compiler's failure){}", who, n, n,
             runs.back().output.empty() ? "" : "; the last run said:\n" + output_tail(runs.back().output));
      fail("the command exits 0 on the original graph in {} of {} runs: nothing to minify (a failure is a non-zero "
           "exit status, a signal or a hang past --timeout); its output ends:\n{}", n, n,
           output_tail(runs.back().output));
    }
    oracle.set_target(first->outcome);
    res_.original = first->outcome;
    int same = 0;
    std::string others;
    for (const CommandRun& r : runs) {
      if (oracle.shows_target(r)) ++same;
      else if (others.empty()) others = r.outcome.kind == FailureKind::None ? "exit 0" : r.outcome.message;
    }
    res_.command.original_runs = n;
    res_.command.original_failures = same;
    KILN_CHECK(same == n, "{} is nondeterministic on the original graph: {} of {} runs showed \"{}\"{}, "
               "another ended with {}. kiln minify stops here: a reduction judged by an oracle that changes its mind "
               "follows noise and ends in a graph that does not fail. Make it deterministic (a fixed seed, "
               "one thread, a longer --timeout), or pin the failure with --check-str", who, same, n,
               first->outcome.message, opts_.check_str.empty() ? "" : " with \"" + opts_.check_str + "\"", others);
  }

  // The smallest failing candidate so far, as the command saw it, in the output directory; the .npy files of
  // inputs earlier checkpoints had and this one does not are removed.
  void checkpoint(const graph::Graph& g) {
    if (opts_.output.empty()) return;
    oracle_->write_candidate(g, opts_.output);
    std::set<std::string> keep;
    for (graph::ValueId id : g.inputs()) keep.insert(graph::input_file_name(g.value(id).name));
    remove_input_files(opts_.output, keep);
  }

  void reverify(const Candidate& out, CommandOracle& oracle) {
    res_.graph = out.graph;
    res_.inputs = src_.inputs_of(out.graph);
    checkpoint(out.graph);
    std::vector<CommandRun> runs = oracle.run_times(out.graph, opts_.reruns);
    stats_.oracle_calls += int(runs.size());
    int same = 0;
    const CommandRun* other = nullptr;
    for (const CommandRun& r : runs) {
      if (oracle.shows_target(r)) ++same;
      else if (!other) other = &r;
    }
    CommandSummary& c = res_.command;
    c.final_runs = int(runs.size());
    c.final_failures = same;
    c.confirmations = oracle.confirmations();
    c.flips = oracle.flips();
    if (!opts_.output.empty()) c.reproduce_line = oracle.reproduce_line(opts_.output);
    res_.failure = other ? other->outcome : res_.original;
    res_.reverified = same == c.final_runs;
    res_.reverify_message = res_.reverified
        ? fmt::format("{} failed the same way on the result in {} of {} runs", oracle.judge_name(), same,
                      c.final_runs)
        : fmt::format("{} failed the same way on the result in only {} of {} runs (another ended with {}): "
                      "it is nondeterministic", oracle.judge_name(), same, c.final_runs,
                      other->outcome.kind == FailureKind::None ? "exit 0" : other->outcome.message);
  }

  const graph::Graph& g_;
  const std::vector<Tensor>& inputs_;
  const MinifyOptions& opts_;
  ValueStore store_;
  InputSource src_;
  TempDirectory work_;
  MinifyResult res_;
  ReduceStats stats_;
  CommandOracle* oracle_ = nullptr;  // during run()
  const std::chrono::steady_clock::time_point t0_;
};

}  // namespace

MinifyResult minify_with_command(const graph::Graph& g, const std::vector<Tensor>& inputs, const MinifyOptions& opts) {
  KILN_CHECK(!opts.resume, "--resume is not available with --cmd or --oracle torch: the output directory holds the "
             "smallest failing candidate so far; to continue from it, minify OUT/candidate.kir --inputs OUT with the "
             "same oracle");
  std::optional<OutputLock> lock;
  if (!opts.output.empty()) {
    check_output_directory(opts.output);
    lock.emplace(opts.output);
  }
  return CommandMinifyRun(g, inputs, opts).run();
}

}  // namespace kiln::minify
