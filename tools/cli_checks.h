// The checks of the CLI's numeric flags: CLI11 validators with the house-style message, so every command
// rejects 0, negative, huge, non-finite and malformed values the same way (kiln.cpp turns the failure into
// `kiln: error: --timeout: -5 is below the minimum; expected seconds, a number > 0 and <= 604800`, exit 2).
#pragma once
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
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

// The flags every command shares.
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

}  // namespace kiln::cli
