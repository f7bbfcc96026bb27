// `kiln repro run FILE`: re-checks a repro file (see docs/cli.md and docs/repro-format.md).
#pragma once
#include "tools/cmd_graph.h"

namespace kiln::cli {

void add_repro_commands(CLI::App& app, std::map<std::string, Runner>& runners);

}  // namespace kiln::cli
