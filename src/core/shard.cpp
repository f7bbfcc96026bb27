// `--shard K/N` (shard.h).
#include "core/shard.h"

#include <fmt/format.h>

#include <charconv>
#include <string_view>

#include "core/error.h"
#include "core/escape.h"

namespace kiln {

std::string ShardSpec::str() const { return fmt::format("{}/{}", index, count); }

ShardSpec parse_shard(const std::string& text, const std::string& option) {
  auto number = [](std::string_view s, int& out) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return !s.empty() && ec == std::errc() && end == s.data() + s.size();
  };
  ShardSpec spec;
  const size_t slash = text.find('/');
  const bool ok = slash != std::string::npos && number(std::string_view(text).substr(0, slash), spec.index) &&
                  number(std::string_view(text).substr(slash + 1), spec.count) && spec.count >= 1 &&
                  spec.count <= 10000 && spec.index >= 1 && spec.index <= spec.count;
  KILN_CHECK(ok, "{} {}: expected K/N, shard K of N with 1 <= K <= N <= 10000 (e.g. {} 2/3)", option,
             terminal_safe(text), option);
  return spec;
}

}  // namespace kiln
