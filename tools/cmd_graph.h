// The graph subcommands of the kiln CLI: `kiln verify`, `kiln fmt` and `kiln run` (see docs/cli.md).
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <string>

namespace kiln::cli {

using Runner = std::function<int()>;
// Registers the subcommands on `app` and their run functions in `runners` (keyed by subcommand name).
void add_graph_commands(CLI::App& app, std::map<std::string, Runner>& runners);

}  // namespace kiln::cli
