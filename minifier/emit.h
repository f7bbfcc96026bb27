// Emitters for a minified repro (kiln minify --emit):
//   cpp    a standalone C++ program against libkiln: the graph (embedded .kir text, parsed at start-up), its
//          inputs loaded from the repro's .npy directory, run on the backend in a forked child with the fp64
//          reference beside it (FailureOracle::classify, repro/oracle.h); prints what happened, exits 1 while it fails.
//   torch  a PyTorch script of the same graph and inputs: every node is one torch.ops.aten call (kiln's op
//          table uses ATen's names and schemas), so a user can check whether PyTorch's own compiler has the
//          bug: it runs the module eagerly and under torch.compile and compares them.
#pragma once
#include <string>

#include "repro/repro.h"

namespace kiln::minify {

// `repro_path` is where the repro file lives (its input directory is resolved relative to it); the emitted
// file is meant to sit beside it.
std::string emit_cpp(const ReproFile& r, const std::string& repro_path);
std::string emit_torch(const ReproFile& r, const std::string& repro_path);

}  // namespace kiln::minify
