// `kiln bisect` and `kiln doctor`: the accuracy bisector and the whole troubleshooting sequence (docs/bisect.md).
#pragma once
#include "tools/cmd_graph.h"

namespace kiln::cli {

void add_bisect_commands(CLI::App& app, std::map<std::string, Runner>& runners);
void add_doctor_commands(CLI::App& app, std::map<std::string, Runner>& runners);

}  // namespace kiln::cli
