// Seeds: the one parser for every place a user gives one (`--seed N` of every command, KILN_SEED, a repro
// file's `inputs: seed N`), so they all accept the same numbers: decimal integers from 0 to 2^64-1, the range
// of the Philox key (core/philox.h). A value one place takes is never refused by another.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

// What a valid seed is, for messages: "a seed, an integer from 0 to 18446744073709551615".
inline constexpr std::string_view kSeedExpected = "a seed, an integer from 0 to 18446744073709551615";

// `text` as a seed: decimal digits only (no sign, space or suffix) within 0..2^64-1; nothing otherwise.
std::optional<uint64_t> parse_seed(std::string_view text);

// Why `text` is not a seed ("below the minimum 0", "above the maximum 18446744073709551615", "not an
// integer"), or "" when parse_seed takes it.
std::string seed_problem(std::string_view text);

// KILN_SEED (default 0), validated by parse_seed; a kiln::Error naming the variable when it is not a seed.
uint64_t opt_seed();

}  // namespace kiln
