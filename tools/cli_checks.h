// The CLI's shared flags and the checks of its numeric flags. The checks: CLI11 validators with the house-style
// message, so every command rejects 0, negative, huge, non-finite and malformed values the same way (kiln.cpp
// turns the failure into `kiln: error: --timeout: -5 is below the minimum; expected seconds, a number > 0 and
// <= 604800`, exit 2). The shared flags: one add_*_option function per flag that several commands take.
#pragma once
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "core/seed.h"

namespace kiln::cli {

// An integer flag: decimal digits (a leading '-' only where `lo` is negative) within [lo, hi].
// `what` names the quantity ("parallel candidates").
template <class T>
CLI::Validator integer_in(T lo, T hi, std::string what) {
  static_assert(std::is_integral_v<T>);
  std::string expected = hi == std::numeric_limits<T>::max() ? fmt::format("{}, an integer >= {}", what, lo)
                                                             : fmt::format("{}, an integer from {} to {}", what, lo, hi);
  return CLI::Validator(
      [lo, hi, expected](std::string& text) -> std::string {
        T v{};
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        std::string problem;
        const bool negative_unsigned = std::is_unsigned_v<T> && text.size() > 1 && text[0] == '-' &&
                                       text.find_first_not_of("0123456789", 1) == std::string::npos;
        if (negative_unsigned) problem = fmt::format("{} is below the minimum {}", text, lo);
        else if (ec == std::errc::result_out_of_range) problem = fmt::format("{} is out of range", text);
        else if (text.empty() || ec != std::errc() || end != text.data() + text.size())
          problem = fmt::format("'{}' is not an integer", text);
        else if (v < lo) problem = fmt::format("{} is below the minimum {}", text, lo);
        else if (v > hi) problem = fmt::format("{} is above the maximum {}", text, hi);
        return problem.empty() ? problem : problem + "; expected " + expected;
      },
      hi == std::numeric_limits<T>::max() ? fmt::format("[{}, ...]", lo) : fmt::format("[{}, {}]", lo, hi), "integer_in");
}

// A real-number flag: finite, within [lo, hi], and above `lo` when `lo_open`.
inline CLI::Validator number_in(double lo, double hi, bool lo_open, std::string what) {
  std::string expected = fmt::format("{}, a number {} {} and <= {}", what, lo_open ? ">" : ">=", lo, hi);
  return CLI::Validator(
      [lo, hi, lo_open, expected](std::string& text) -> std::string {
        double v = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        std::string problem;
        if (text.empty() || ec != std::errc() || end != text.data() + text.size())
          problem = ec == std::errc::result_out_of_range ? fmt::format("{} is out of range", text)
                                                         : fmt::format("'{}' is not a number", text);
        else if (!std::isfinite(v)) problem = fmt::format("{} is not finite", text);
        else if (v < lo || (lo_open && v == lo)) problem = fmt::format("{} is too small", text);
        else if (v > hi) problem = fmt::format("{} is too large", text);
        return problem.empty() ? problem : problem + "; expected " + expected;
      },
      fmt::format("{}{}, {}]", lo_open ? "(" : "[", lo, hi), "number_in");
}

// The validators of the shared flags below.
// A seed: what parse_seed (core/seed.h) takes, as KILN_SEED and repro files do.
inline CLI::Validator seed_check() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::string problem = seed_problem(text);
        if (problem.empty()) return "";
        return fmt::format("{} is {}; expected {}", problem == "not an integer" ? "'" + text + "'" : text, problem,
                           kSeedExpected);
      },
      "[0, 18446744073709551615]", "seed");
}
inline CLI::Validator timeout_check() {
  return number_in(0, 7 * 24 * 3600, true, "seconds");  // a week: beyond it a run is a hang in every sense
}
inline CLI::Validator tol_check() { return number_in(0, 1e6, false, "a tolerance"); }

// The options table of the flags several commands share (docs/cli.md, Shared options): each is declared here
// once, with one spelling, default, range and help text, and every command that takes it calls the function
// (tests/test_cli_options.cpp compares every command's --help). The defaults and why:
//   --backend inductor  every command is about the compiler; eager is the reference --check compares with.
//   --tol 1e-4          the comparator's (atol = rtol) for f32; 0 asks for exact agreement.
//   --timeout 60        a slow graph called a hang is a wrong verdict, a long wait only a slow one; commands
//                       that wait on many hanging candidates (minify, fuzz) take a shorter --timeout.
//   --seed KILN_SEED    so `KILN_SEED=3 kiln ...` and `--seed 3` say the same in every command.
//   -j 1                times are steadiest and output is in order; results never depend on it.
inline constexpr const char* kDefaultBackend = "inductor";
inline constexpr double kDefaultTol = 1e-4;
inline constexpr double kDefaultTimeout = 60;

inline constexpr const char* kBackendHelp =
    "the backend: inductor (the CPU compiler), inductor_cuda, aot_eager, eager (the reference interpreter), ... "
    "(default inductor; a repro file's recorded one for a repro; an unknown name lists them)";
inline CLI::Option* add_backend_option(CLI::App& app, std::string& backend) {
  backend = kDefaultBackend;
  return app.add_option("--backend", backend, kBackendHelp);
}
// Unset when not given: the caller's default is then a repro file's backend (else inductor).
inline CLI::Option* add_backend_option(CLI::App& app, std::optional<std::string>& backend) {
  return app.add_option("--backend", backend, kBackendHelp);
}

inline constexpr const char* kSeedHelp = "the seed generated inputs and random ops are drawn from (default KILN_SEED, 0)";
inline CLI::Option* add_seed_option(CLI::App& app, std::optional<uint64_t>& seed) {
  return app.add_option("--seed", seed, kSeedHelp)->check(seed_check());
}

// Excludes `seed` when it is given.
inline CLI::Option* add_inputs_option(CLI::App& app, std::string& dir, CLI::Option* seed) {
  CLI::Option* o = app.add_option("--inputs", dir, "inputs: one .npy per graph input in this directory, named after "
                                                   "it (%x -> x.npy); excludes --seed");
  if (seed) o->excludes(seed);
  return o;
}

inline constexpr const char* kTolHelp =
    "the comparator's tolerance (atol = rtol; default 1e-4, or a repro file's recorded one)";
inline CLI::Option* add_tol_option(CLI::App& app, double& tol) {
  tol = kDefaultTol;
  return app.add_option("--tol", tol, kTolHelp)->check(tol_check());
}
// Unset when not given: the caller's default is then a repro file's tolerance (else 1e-4).
inline CLI::Option* add_tol_option(CLI::App& app, std::optional<double>& tol) {
  return app.add_option("--tol", tol, kTolHelp)->check(tol_check());
}

inline CLI::Option* add_timeout_option(CLI::App& app, double& seconds) {
  seconds = kDefaultTimeout;
  return app.add_option("--timeout", seconds, "seconds a run may take after compiling before it counts as a hang "
                                              "(default 60; compiling has its own limit)")
      ->check(timeout_check());
}

inline CLI::Option* add_jobs_option(CLI::App& app, int& jobs) {
  jobs = 1;
  return app.add_option("-j,--jobs", jobs, "child processes at once (default 1; results do not depend on it)")
      ->check(integer_in(1, 256, "the number of child processes"));
}

inline CLI::Option* add_quiet_option(CLI::App& app, bool& quiet) {
  quiet = false;
  return app.add_flag("-q,--quiet", quiet, "no progress lines on stderr");
}

// -o/--output: what the command writes (`help` says what: a file or a directory). `old_out_alias`: the command
// took `--out` before, which stays as a hidden alias for users' scripts.
inline CLI::Option* add_output_option(CLI::App& app, std::string& out, const std::string& help,
                                      bool old_out_alias = false) {
  CLI::Option* o = app.add_option("-o,--output", out, help);
  if (old_out_alias) app.add_option("--out", out, "the old spelling of --output")->group("");  // hidden
  return o;
}

// The slowdown that is a regression in bench and gate (the defaults differ: bench on a quiet machine, gate on
// shared CI runners; gate/judge.h). `--tolerance` was bench's spelling and stays as a hidden alias there.
inline CLI::Option* add_time_tolerance_option(CLI::App& app, double& tolerance, const std::string& help,
                                              bool old_tolerance_alias = false) {
  CLI::Option* o = app.add_option("--time-tolerance", tolerance, help)
                       ->check(number_in(0, 100, false, "a relative slowdown"));
  if (old_tolerance_alias)
    app.add_option("--tolerance", tolerance, "the old spelling of --time-tolerance")
        ->group("")  // hidden
        ->check(number_in(0, 100, false, "a relative slowdown"));
  return o;
}

}  // namespace kiln::cli
