// `kiln import MODEL.pt2 [-o DIR] [--decompose core|none]`: a torch.export archive to a .kir graph plus one
// .npy per parameter, buffer and constant (docs/import.md).
#pragma once
#include "tools/cmd_graph.h"

namespace kiln::cli {

void add_import_commands(CLI::App& app, std::map<std::string, Runner>& runners);

}  // namespace kiln::cli
