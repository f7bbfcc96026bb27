// `kiln bench G...` and `kiln bench report HISTORY`: benchmark tracking (see docs/bench.md).
#pragma once
#include "tools/cmd_graph.h"

namespace kiln::cli {

void add_bench_commands(CLI::App& app, std::map<std::string, Runner>& runners);

}  // namespace kiln::cli
