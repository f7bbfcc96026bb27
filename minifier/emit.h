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

// For `kiln minify --emit torch` (a minify writes no outputs of its own): writes what the script compares with into
// the repro's input directory (made for a graph without inputs) and returns `r` naming it: reference_<k>.npy, kiln's
// reference interpreter at the graph's dtypes, which PyTorch eager must match; and for an accuracy failure of the
// outputs, output_<k>.npy, the failing backend's outputs, which then differ (the script exits 1: the recorded failure
// shows). Nothing for a graph with random ops (PyTorch draws other numbers).
ReproFile with_torch_comparison_values(const ReproFile& r, const std::string& repro_path);

}  // namespace kiln::minify
