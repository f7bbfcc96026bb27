// Subcommands of the kiln CLI. Each subcommand registers its options and a run function.
#pragma once
#include <CLI/CLI.hpp>

namespace kiln::cli {

void add_commands(CLI::App& app);
int run_selected(CLI::App& app);  // runs the parsed subcommand, returns the exit code

}  // namespace kiln::cli
