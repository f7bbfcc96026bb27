// KILN_DEBUG_DIR's layout, in one place: every dump (a compile's passes, an AOT training compile, a pass
// pipeline's run, a captured graph) gets a directory of its own, `<root>/<stage>/<NNN>_<graph>/`, claimed by
// creating it (the first NNN whose directory does not exist yet, so neither a recompile of the same graph, nor
// another graph of the same name, nor another process writing to the same root ever overwrites it), and listed in
// `<root>/index.tsv`, one line per directory as it is claimed: the directory (relative to the root), the graph's
// name, the process id and the process's command line (tab-separated; tabs, line breaks and backslashes in
// them written as \t, \n, \\).
#pragma once
#include <filesystem>
#include <string_view>

namespace kiln {

// The directory for one dump of graph `graph_name` at `stage` ("inductor", "aot", "capture", or a pass
// pipeline's stage name), created and indexed; empty when KILN_DEBUG_DIR is not set. Throws kiln::Error when the
// root or the stage's directory cannot be created.
std::filesystem::path claim_debug_dir(std::string_view stage, std::string_view graph_name);

}  // namespace kiln
