// `kiln fmt`: a parsed graph printed in canonical form with its source's comments kept where they were
// (print_graph_keeping_comments, graph/text.h). The source is lexed again for its comments and .npy references,
// and the printer's lines get them back.
#include "graph/text.h"

#include <climits>

#include "graph/lexer.h"
#include "graph/printer.h"

namespace kiln::graph {
namespace kir {
namespace {

// Where a source's comments go in the printed graph, by slot: 0 = before the graph, 1 = the header line,
// 2 + i = node i, 2 + n = the return line, 3 + n = the closing '}'. A comment on a line of its own goes before
// the first statement below it; one after code goes at the end of the last statement starting at or above it.
struct CommentPlaces {
  std::vector<std::vector<std::string>> before;  // own-line comments, printed above the slot's line
  std::vector<std::string> trailing;             // comments after code, appended to the slot's line
};

CommentPlaces place_comments(const Graph& g, std::string_view source, const std::string& filename) {
  Lexer lexer(source, filename);
  int graph_line = 0, return_line = INT_MAX, close_line = INT_MAX;
  for (Token t = lexer.next(); t.kind != Tok::End; t = lexer.next()) {
    if (t.kind == Tok::Ident && t.text == "graph" && graph_line == 0) graph_line = t.line;
    if (t.kind == Tok::Ident && t.text == "return") return_line = t.line;
    if (t.kind == Tok::Punct && t.text == "}") close_line = t.line;
  }
  const std::vector<Node>& nodes = g.nodes();
  const size_t n = nodes.size();
  CommentPlaces places{std::vector<std::vector<std::string>>(n + 4), std::vector<std::string>(n + 4)};
  for (const auto& c : lexer.comments()) {
    if (c.trailing) {
      size_t slot = 1;
      for (size_t i = 0; i < n; ++i)
        if (nodes[i].loc.line <= c.line) slot = 2 + i;
      if (c.line >= return_line) slot = 2 + n;
      if (c.line >= close_line && close_line != return_line) slot = 3 + n;
      places.trailing[slot] += (places.trailing[slot].empty() ? "  " : " ") + c.text;
      continue;
    }
    size_t slot = c.line < graph_line ? 0 : 2 + n;
    if (slot != 0) {
      for (size_t i = n; i-- > 0;)
        if (nodes[i].loc.line > c.line) slot = 2 + i;
      if (slot == 2 + n && c.line > close_line) slot = 3 + n;
    }
    places.before[slot].push_back(c.text);
  }
  return places;
}

// The constants of `g` (parsed from `source`) that the source reads from .npy files, by node index: each
// `npy("file") sha256="hash"` belongs to the statement that starts last before it (a node's location is its
// first result's name).
std::unordered_map<size_t, NpyReference> npy_references(const Graph& g, std::string_view source,
                                                        const std::string& filename) {
  std::unordered_map<size_t, NpyReference> refs;
  const std::vector<Node>& nodes = g.nodes();
  Lexer lexer(source, filename);
  std::vector<Token> window;  // the last 7 tokens: npy ( "file" ) sha256 = "hash"
  size_t node = 0;            // the first node starting after the window's first token
  for (Token t = lexer.next(); t.kind != Tok::End; t = lexer.next()) {
    window.push_back(t);
    if (window.size() > 7) window.erase(window.begin());
    if (window.size() < 7 || !window[0].is_word("npy") || !window[1].is('(') || window[2].kind != Tok::String ||
        !window[3].is(')') || !window[4].is_word("sha256") || !window[5].is('=') || window[6].kind != Tok::String)
      continue;
    auto starts_before = [&](const Node& n) {
      return n.loc.line < window[0].line || (n.loc.line == window[0].line && n.loc.col < window[0].col);
    };
    while (node < nodes.size() && starts_before(nodes[node])) ++node;
    KILN_ASSERT(node > 0 && nodes[node - 1].kind == NodeKind::Constant, "{}:{}:{}: an npy reference outside a "
                "constant in a graph that parsed", filename, window[0].line, window[0].col);
    refs[node - 1] = {std::string(window[2].text), std::string(window[6].text)};
  }
  return refs;
}

}  // namespace
}  // namespace kir

std::string print_graph_keeping_comments(const Graph& g, std::string_view source, const std::string& filename) {
  const kir::CommentPlaces places = kir::place_comments(g, source, filename);
  // The printed form, by slot: the header up to ") {", one line per node, the return line, "}".
  // Constants read from .npy files stay references to them (inlining a large one would make a file larger
  // than a graph file may be, docs/cli.md).
  const std::string printed = kir::print_graph_with(g, {}, kir::npy_references(g, source, filename));
  const size_t header_end = printed.find(") {\n") + 3;
  std::vector<std::string> lines{printed.substr(0, header_end)};
  for (size_t pos = header_end + 1; pos < printed.size();) {
    size_t nl = printed.find('\n', pos);
    lines.push_back(printed.substr(pos, nl - pos));
    pos = nl + 1;
  }
  std::string out;
  auto own_lines = [&](size_t slot, std::string_view indent) {
    for (const std::string& c : places.before[slot]) out += fmt::format("{}{}\n", indent, c);
  };
  own_lines(0, "");
  for (size_t slot = 1; slot <= lines.size(); ++slot) {
    if (slot >= 2 && slot < lines.size()) own_lines(slot, "  ");
    out += lines[slot - 1] + places.trailing[slot] + "\n";
  }
  own_lines(lines.size(), "");
  return out;
}

}  // namespace kiln::graph
