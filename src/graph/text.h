// The .kir text format: printing and parsing graphs (decision 2). parse_graph(print_graph(g)) == g for every
// graph. The grammar is documented in docs/kir-format.md. The printer is print.cpp, the lexer lexer.h, the
// parser parse.cpp, `kiln fmt`'s comment keeping print_keeping_comments.cpp; the verifier is graph/verify.h.
#pragma once
#include <string>
#include <string_view>

#include "graph/graph.h"

namespace kiln::graph {

struct PrintOptions {
  // Constants with more elements than this are written to a .npy file beside the .kir (named by content
  // hash) and referenced; smaller ones are inlined.
  int64_t inline_constant_limit = 64;
  std::string npy_dir;  // where referenced constants go (empty: inline everything)
};

std::string print_graph(const Graph& g, const PrintOptions& opts = {});

// Parses .kir text. `filename` is used in error messages ("file:line:col: what is wrong; what to do") and to
// resolve relative .npy references. Throws kiln::Error on any malformed input; never crashes. Each node gets the
// verifier's node check (argument binding and shape inference, once per node) as it is read, and written result
// types must match it, so the returned graph passes verify_graph (graph/verify.h) without verifying it again.
Graph parse_graph(std::string_view text, const std::string& filename = "<input>");
Graph load_graph(const std::string& path);  // reads and parses a file (a regular file within kMaxTextFileBytes)
// `g` (parsed from `source`, unchanged since) in canonical form with the source's comments kept: a comment on a
// line of its own stays before the statement that follows it, one after code stays at the end of that
// statement's line (`kiln fmt`). Idempotent.
std::string print_graph_keeping_comments(const Graph& g, std::string_view source, const std::string& filename);
// Writes atomically (core/files.h: write_file_atomic).
void save_graph(const Graph& g, const std::string& path, const PrintOptions& opts = {});

}  // namespace kiln::graph
