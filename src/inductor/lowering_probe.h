// What the inductor does with each op of the table, found by running its own decomposition and lowering on a
// one-node graph (`kiln ops` prints it): no hand-kept list, so the column cannot drift from the compiler.
#pragma once
#include <string>

#include "ops/op_info.h"

namespace kiln::inductor {

struct OpLowering {
  enum class Kind { Lowered, Decomposed, Extern, Unknown } kind = Kind::Unknown;
  std::string reason;  // Extern: why it runs its eager kernel; Unknown: why no probe call could be built
  std::string str() const;  // "lowered", "decomposed", "extern: <reason>", "?: <reason>"
};

// Probes `op` with meta tensors standing for graph inputs (no data, no code generation).
OpLowering probe_lowering(const OpInfo& op);

}  // namespace kiln::inductor
