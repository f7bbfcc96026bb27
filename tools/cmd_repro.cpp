// `kiln repro run FILE [--timeout S]`: exit 1 while the recorded failure still happens (or the graph fails in
// another way, which it says), 0 once it no longer does, so a directory of repros of fixed bugs is a
// regression suite; 2 for a file that cannot be read.
#include "tools/cmd_repro.h"

#include <fmt/format.h>

#include <cstdio>

#include "core/escape.h"
#include "repro/reproduce.h"
#include "tools/cli_checks.h"

namespace kiln::cli {

namespace {

int run_repro_run(const std::string& file, double timeout_s) {
  ReproFile r = load_repro(file);
  // Everything below quotes the repro file's own text (its name, backend, messages, GPU), the most hostile input
  // kiln reads: printed terminal_safe.
  if (std::string note = gpu_mismatch_note(r); !note.empty()) fmt::print("{}\n", terminal_safe_lines(note));
  std::fflush(stdout);  // before the forked child's output
  ReproOutcome o = reproduce(r, file, timeout_s);
  fmt::print("{}: recorded failure: {} on backend {}\n", terminal_safe(file), r.expected.kind, terminal_safe(r.backend));
  if (!r.expected.message.empty()) fmt::print("  recorded: {}\n", terminal_safe_lines(r.expected.message));
  if (!r.expected.failed()) {  // `failure: none`: the repro records a graph that passed
    if (!o.observed.failed()) {
      fmt::print("PASSES: the repro records no failure (failure: none) and the graph runs and matches the fp64 "
                 "reference\n");
      return 0;
    }
    fmt::print("FAILS: {} (the repro records no failure: failure: none)\n  observed: {}\n", o.observed.kind,
               terminal_safe_lines(o.observed.message));
    return 1;
  }
  if (o.reproduces) {
    fmt::print("REPRODUCES: {}\n  observed: {}\n", o.observed.kind, terminal_safe_lines(o.observed.message));
    return 1;
  }
  if (o.observed.failed()) {
    fmt::print("FAILS DIFFERENTLY: {} (the recorded {} no longer happens)\n  observed: {}\n", o.observed.kind,
               r.expected.kind, terminal_safe_lines(o.observed.message));
    return 1;
  }
  fmt::print("DOES NOT REPRODUCE: the graph now runs and matches the fp64 reference\n");
  return 0;
}

}  // namespace

void add_repro_commands(CLI::App& app, std::map<std::string, Runner>& runners) {
  auto* repro = app.add_subcommand("repro", "work with repro files");
  repro->require_subcommand(1);
  auto* run = repro->add_subcommand("run", "check whether a repro file's recorded failure still happens (exit 1 if "
                                           "it does, 0 if it no longer does)");
  static std::string file;
  static double timeout_s = 60;
  run->add_option("file", file, "the repro file")->required();
  add_timeout_option(*run, timeout_s);
  runners["repro"] = [] { return run_repro_run(file, timeout_s); };
}

}  // namespace kiln::cli
