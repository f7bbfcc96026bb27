// `kiln fuzz`: property-based graph fuzzing of a backend (see docs/fuzz.md and docs/cli.md).
#pragma once
#include "tools/cmd_graph.h"

namespace kiln::cli {

void add_fuzz_commands(CLI::App& app, std::map<std::string, Runner>& runners);

}  // namespace kiln::cli
