// CompileContext: the one value every inductor pass receives besides the IR it transforms. It holds what the
// compile depends on besides the graph (the backend's Target, the CompileOptions, the test-only bug injection
// of KILN_INJECT) and what the passes leave behind for the user (the decision log). The compile cache key is
// derived from it (key_material), so a setting that changes the generated code cannot be left out of the key.
#pragma once
#include <string>
#include <vector>

#include "core/log.h"
#include "inductor/compile_options.h"
#include "core/inject.h"
#include "inductor/target.h"

namespace kiln::inductor {

// The decisions the passes took, with their reasons (fusion refusals, kernel-local buffers, streaming stores,
// ...), in order. Each is also logged on its pass's KILN_LOGS channel.
class DecisionLog {
 public:
  void record(LogChannel channel, std::string decision);
  const std::vector<std::string>& all() const { return decisions_; }
  size_t size() const { return decisions_.size(); }

 private:
  std::vector<std::string> decisions_;
};

struct CompileContext {
  std::string graph_name;  // for messages and logs (not an input to the generated code)
  Target target;
  CompileOptions options;
  InjectSpec inject;  // KILN_INJECT: empty unless a test or a tool asked for a bug
  DecisionLog decisions;

  // Everything above that can change the compiled program, as text: the graph-level cache key is this plus
  // the graph's structural hash. (The decision log is an output, not an input.)
  std::string key_material() const;
};

}  // namespace kiln::inductor
