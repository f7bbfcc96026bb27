// The op names in a .kir file, for tests that check what a tool shrank a graph to. Apart from cli_run.h, which
// runs the CLI only and so serves tests that link nothing of kiln (tests/timing/).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "cli_run.h"
#include "graph/text.h"

namespace kiln::cli_test {

// The op names of a .kir file's op nodes, in order (what a minified candidate was shrunk to).
inline std::vector<std::string> op_names_in(const std::filesystem::path& kir) {
  graph::Graph g = graph::parse_graph(read_text(kir), kir.string());
  std::vector<std::string> ops;
  for (const graph::Node& n : g.nodes())
    if (n.kind == graph::NodeKind::Op) ops.push_back(std::string(n.info().name));
  return ops;
}

}  // namespace kiln::cli_test
