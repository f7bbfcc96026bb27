// `kiln minify`: shrink a failing graph to a minimal repro (see docs/cli.md and docs/minifier.md).
#pragma once
#include "tools/cmd_graph.h"

namespace kiln::cli {

void add_minify_commands(CLI::App& app, std::map<std::string, Runner>& runners);

}  // namespace kiln::cli
