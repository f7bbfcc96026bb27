// "inject_test": a backend for testing the tools (minifier, bisector, fuzzer) before and beside the inductor:
// the reference interpreter with the KILN_INJECT faults applied to nodes of the named ops (decision 5):
//   op:compile_error   throws kiln::CompileError before running anything if the graph has such a node
//   op:runtime_error   throws kiln::Error when such a node runs
//   op:crash           raises SIGSEGV when such a node runs
//   op:accuracy        such a node's result is off by one (x + 1)
//   op:hang            such a node never finishes (it waits for a signal): for testing time limits
// Other entries (e.g. fusion:accuracy, var:decomposition, meant for the inductor) are ignored here.
#pragma once
#include <string>

namespace kiln::minify {

inline constexpr const char* kInjectTestBackend = "inject_test";
void register_inject_test_backend();  // idempotent

}  // namespace kiln::minify
