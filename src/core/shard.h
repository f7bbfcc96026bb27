// A shard of a job split across N workers or CI runners: `--shard K/N` of `kiln gate` (a suite's entries) and
// `kiln fuzz` (a campaign's graph indices). One spelling, one parser, one rule: K is 1-based, 1 <= K <= N.
#pragma once
#include <string>

namespace kiln {

struct ShardSpec {
  int index = 1, count = 1;  // shard `index` of `count`, 1-based ("2/3")
  std::string str() const;   // "2/3"
};
// "K/N" with 1 <= K <= N <= 10000; anything else is a kiln::Error naming `option` and the value.
ShardSpec parse_shard(const std::string& text, const std::string& option = "--shard");

}  // namespace kiln
