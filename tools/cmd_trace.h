// `kiln trace report DIR [-o OUT]`: KILN_TRACE's files drawn as one HTML page and a Chrome trace (docs/observability.md).
#pragma once
#include "tools/cmd_graph.h"

namespace kiln::cli {

void add_trace_commands(CLI::App& app, std::map<std::string, Runner>& runners);

}  // namespace kiln::cli
