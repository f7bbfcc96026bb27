// parse_seed and seed_problem (seed.h); opt_seed reads the options table (options.cpp).
#include "core/seed.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace kiln {

std::optional<uint64_t> parse_seed(std::string_view text) {
  const bool digits = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
                        return std::isdigit(static_cast<unsigned char>(c));
                      });
  if (!digits) return std::nullopt;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::string seed_problem(std::string_view text) {
  if (parse_seed(text)) return "";
  const bool digits = text.size() > 1 && text[0] == '-' && std::all_of(text.begin() + 1, text.end(), [](char c) {
                        return std::isdigit(static_cast<unsigned char>(c));
                      });
  if (digits) return "below the minimum 0";
  if (!text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return "above the maximum 18446744073709551615";
  return "not an integer";
}

}  // namespace kiln
