// `kiln aot`: AOT autograd on a .kir graph: the joint, forward and backward graphs (docs/aot.md, docs/cli.md).
#pragma once
#include "tools/cmd_graph.h"

namespace kiln::cli {

void add_aot_commands(CLI::App& app, std::map<std::string, Runner>& runners);

}  // namespace kiln::cli
