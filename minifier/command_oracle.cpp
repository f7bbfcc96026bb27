// CommandOracle: each candidate written to a directory of its own and judged by the user's command, in forked
// children (repro/isolate.h); see command_oracle.h.
#include "minifier/command_oracle.h"

#include <fmt/format.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>

#include "core/escape.h"
#include "core/files.h"
#include "graph/inputs.h"
#include "graph/text.h"
#include "repro/command.h"
#include "repro/failure.h"
#include "repro/isolate.h"

namespace kiln::minify {

namespace fs = std::filesystem;

namespace {

constexpr size_t kKeptOutput = size_t(64) << 10;

std::string signal_text(int s) {
  const char* abbrev = sigabbrev_np(s);
  return abbrev ? fmt::format("{} (SIG{})", s, abbrev) : std::to_string(s);
}

// In the child: the command in `dir` with the candidate's variables; "exit N\n" or "signal N\n", then its output.
std::string run_command_in(const std::string& command, const fs::path& dir) {
  if (::chdir(dir.c_str()) != 0) fail("could not enter the candidate directory {}: {}", dir.string(), strerror(errno));
  const std::string file = (dir / "candidate.kir").string();
  // The settings in effect (a repro file's configuration applied in this process, say) reach the command as
  // the reproduce line names them (command_reproduce_line), so the line reruns what the command saw.
  for (const auto& [name, value] : settings_in_effect()) setenv(name.c_str(), value.c_str(), 1);
  setenv("KILN_CANDIDATE", file.c_str(), 1);
  setenv("KILN_CANDIDATE_DIR", dir.c_str(), 1);
  const std::string line = "(" + command + ") </dev/null 2>&1";
  FILE* p = popen(line.c_str(), "r");
  KILN_CHECK(p, "could not start /bin/sh for the command: {}", strerror(errno));
  std::string output;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) {
    output.append(buf, n);
    if (output.size() > 2 * kKeptOutput) output.erase(0, output.size() - kKeptOutput);
  }
  const int status = pclose(p);
  if (output.size() > kKeptOutput) output.erase(0, output.size() - kKeptOutput);
  KILN_CHECK(status != -1, "could not wait for the command: {}", strerror(errno));
  if (WIFSIGNALED(status)) return fmt::format("signal {}\n{}", WTERMSIG(status), output);
  return fmt::format("exit {}\n{}", WEXITSTATUS(status), output);
}

}  // namespace

void write_candidate_directory(const graph::Graph& g, const std::vector<Tensor>& inputs, const std::string& dir) {
  graph::save_inputs(g, inputs, dir);  // creates DIR; each .npy atomically
  write_file_atomic((fs::path(dir) / "candidate.kir").string(), graph::print_graph(g));
}

std::string command_reproduce_line(const std::string& command, const std::string& dir) {
  const std::string abs = fs::absolute(dir).lexically_normal().string();
  const std::string file = (fs::path(abs) / "candidate.kir").string();
  return fmt::format("cd {} && {}KILN_CANDIDATE={} KILN_CANDIDATE_DIR={} /bin/sh -c {}", shell_quote(abs),
                     environment_prefix({}), shell_quote(file), shell_quote(abs), shell_quote(command));
}

CommandOracle::CommandOracle(const InputSource& src, CommandOracleOptions opts) : src_(src), opts_(std::move(opts)) {
  KILN_CHECK(opts_.runner || !opts_.command.empty(), "kiln minify --cmd: the command is empty");
  KILN_CHECK(!opts_.work_dir.empty(), "CommandOracle: no directory for the candidates");
}

void CommandOracle::write_candidate(const graph::Graph& g, const std::string& dir) const {
  if (opts_.runner) opts_.runner->write(g, src_.inputs_of(g), dir);
  else write_candidate_directory(g, src_.inputs_of(g), dir);
}

std::string CommandOracle::reproduce_line(const std::string& dir) const {
  return opts_.runner ? opts_.runner->reproduce_line(dir) : command_reproduce_line(opts_.command, dir);
}

std::string CommandOracle::judge_name() const { return opts_.runner ? opts_.runner->judge_name() : "the command"; }

std::vector<CommandRun> CommandOracle::run_many(const std::vector<const graph::Graph*>& graphs) {
  if (opts_.runner) {
    std::vector<std::string> dirs;
    for (const graph::Graph* g : graphs) {
      dirs.push_back((fs::path(opts_.work_dir) / fmt::format("candidate-{}", next_dir_++)).string());
      opts_.runner->write(*g, src_.inputs_of(*g), dirs.back());
    }
    std::vector<CommandRun> out = opts_.runner->run(dirs);
    for (const std::string& d : dirs) {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
    return out;
  }
  std::vector<fs::path> dirs;
  std::vector<std::function<std::string()>> bodies;
  for (const graph::Graph* g : graphs) {
    dirs.push_back(fs::path(opts_.work_dir) / fmt::format("candidate-{}", next_dir_++));
    bodies.push_back([this, g, dir = dirs.back()] {
      write_candidate_directory(*g, src_.inputs_of(*g), dir.string());
      return run_command_in(opts_.command, dir);
    });
  }
  std::vector<IsolatedResult> rs = run_isolated_many(bodies, opts_.jobs, opts_.timeout_s);
  std::vector<CommandRun> out;
  for (size_t i = 0; i < rs.size(); ++i) {
    std::error_code ec;
    fs::remove_all(dirs[i], ec);
    const IsolatedResult& r = rs[i];
    CommandRun run;
    if (r.kind == FailureKind::Hang) {
      run.outcome = {FailureKind::Hang, fmt::format("the command ran past the time limit of {} s", opts_.timeout_s)};
    } else if (r.kind != FailureKind::None) {
      // The child is kiln's, not the command: it failed writing the candidate or starting the shell.
      fail("kiln minify --cmd: could not run the command on a candidate: {}", r.payload);
    } else {
      const size_t eol = r.payload.find('\n');
      const std::string head = r.payload.substr(0, eol);
      run.output = eol == std::string::npos ? "" : r.payload.substr(eol + 1);
      const int code = std::atoi(head.c_str() + head.find(' ') + 1);
      if (head.rfind("signal ", 0) == 0)
        run.outcome = {FailureKind::Crash, "the command was killed by signal " + signal_text(code)};
      else if (code != 0)
        run.outcome = {FailureKind::RuntimeError, fmt::format("the command exited with status {}", code)};
    }
    out.push_back(std::move(run));
  }
  return out;
}

bool CommandOracle::shows_target(const CommandRun& r) const {
  if (r.outcome.kind == FailureKind::None) return false;
  if (!opts_.check_str.empty() && r.output.find(opts_.check_str) == std::string::npos) return false;
  // A runner's messages are exception texts: the same failure modulo names and numbers. A command's are kiln's
  // own ("exited with status 1"), where the number is the failure.
  if (opts_.runner)
    return same_failure(opts_.target, r.outcome, SameFailureRules{.check_str = "", .signal_must_match = true});
  return r.outcome.kind == opts_.target.kind && r.outcome.message == opts_.target.message;
}

Verdict CommandOracle::verdict(const CommandRun& r) const {
  Verdict v;
  v.observed = r.outcome;
  v.fails = shows_target(r);
  return v;
}

std::vector<std::optional<Verdict>> CommandOracle::test_batch(const std::vector<const Candidate*>& batch) {
  std::vector<const graph::Graph*> graphs;
  for (const Candidate* c : batch) graphs.push_back(&c->graph);
  std::vector<CommandRun> runs = run_many(graphs);
  std::vector<std::optional<Verdict>> out;
  for (size_t i = 0; i < runs.size(); ++i) {
    Verdict v = verdict(runs[i]);
    first_verdicts_[candidate_key(batch[i]->graph)] = v.fails;
    out.push_back(v);
  }
  return out;
}

Verdict CommandOracle::test(const Candidate& c) { return *test_batch({&c})[0]; }

Verdict CommandOracle::confirm(const Candidate& c) {
  Verdict v = verdict(run_many({&c.graph})[0]);
  auto first = first_verdicts_.find(candidate_key(c.graph));
  if (first != first_verdicts_.end()) {
    ++confirmations_;
    if (first->second != v.fails) ++flips_;
  }
  return v;
}

std::vector<CommandRun> CommandOracle::run_times(const graph::Graph& g, int times) {
  std::vector<CommandRun> out;
  for (int i = 0; i < times; ++i) out.push_back(run_many({&g})[0]);
  return out;
}

}  // namespace kiln::minify
