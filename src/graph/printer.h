// The .kir printer's pieces (print.cpp), internal to src/graph: how the lexer, the parser, the verifier and
// `kiln fmt` write names, types and calls in their messages and output, exactly as print_graph writes them.
#pragma once
#include <string>
#include <string_view>
#include <unordered_map>

#include "graph/text.h"

namespace kiln::graph::kir {

// A string literal: "a\"b", with \\ \" \n \t \r and \xHH escapes.
std::string quote(std::string_view s);
// A value name as written: %x, or %"quoted" when it is not all letters, digits, '_' and '.'.
std::string name_ref(std::string_view name);
// Value `id` of `g` as written (%<undefined value #N> for an id outside the graph).
std::string value_ref(const Graph& g, ValueId id);
// A type: f32[4, 3], with {strides} when they are not contiguous and @device when it is not the CPU.
std::string type_str(const TensorMeta& m);
// "linear(%x, %w1)": positional arguments up to the first omitted default or kwarg-only one, then key=value.
std::string call_str(const Graph& g, const Node& n);
// The node's results, "%a, %b".
std::string results_str(const Graph& g, const Node& n);

// The hash recorded for a constant: SHA-256 of its elements in row-major order (numpy: arr.tobytes()).
std::string tensor_sha256(const Tensor& t);

// A constant its source read from a .npy file: the file name and content hash as written there.
struct NpyReference {
  std::string file, sha256;
};

// print_graph, with `refs` (by node index) the constants to print as the .npy references they were read from.
std::string print_graph_with(const Graph& g, const PrintOptions& opts,
                             const std::unordered_map<size_t, NpyReference>& refs);

}  // namespace kiln::graph::kir
