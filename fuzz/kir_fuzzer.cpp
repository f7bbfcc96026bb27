// libFuzzer target for the .kir parser and the verifier. Every input must either be rejected with a
// kiln::Error or parse into a graph that verifies and prints back to text that parses to the same graph. Any
// other exception, a crash, a sanitizer report or a round-trip mismatch is a finding. Build and run: ci/fuzz.sh.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "graph/text.h"
#include "graph/verify.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::graph::Graph g;
  try {
    // A file name in a directory that does not exist: relative .npy references cannot reach real files.
    g = kiln::graph::parse_graph(text, "/nonexistent/fuzz.kir");
    kiln::graph::verify_graph(g, "fuzz.kir");
  } catch (const kiln::Error&) {
    return 0;
  }
  // Accepted input: its printed form must parse back to the same graph.
  std::string printed = kiln::graph::print_graph(g);
  try {
    kiln::graph::Graph back = kiln::graph::parse_graph(printed, "printed.kir");
    if (kiln::graph::print_graph(back) == printed && back.structural_hash() == g.structural_hash()) return 0;
    std::fprintf(stderr, "round trip mismatch: reprinted as\n%s\n", kiln::graph::print_graph(back).c_str());
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "the printed graph does not parse: %s\n", e.what());
  }
  std::fprintf(stderr, "printed graph:\n%s\n", printed.c_str());
  std::abort();
}
