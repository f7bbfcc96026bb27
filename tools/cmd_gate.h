// `kiln gate SUITE`: CI regression gating over a suite of graphs and repro files (see docs/gate.md).
#pragma once
#include "tools/cmd_graph.h"

namespace kiln::cli {

void add_gate_commands(CLI::App& app, std::map<std::string, Runner>& runners);

}  // namespace kiln::cli
