// The fuzzer's generator as a RapidCheck generator (gen::exec): RapidCheck draws the graph's node seeds, and the
// graph is regenerated from them whenever a shrink changes them, so every shrunk graph is valid by
// construction and removing a node keeps the others. Header-only: the fuzz library does not link RapidCheck.
#pragma once
#include <rapidcheck.h>

#include <ostream>

#include "fuzz/generator.h"
#include "graph/text.h"

namespace kiln::fuzz {

// A list of node seeds: RapidCheck shrinks a list by removing elements (each removes one node, the others keep
// their draws) and each element towards 0; the graph is regenerated from the shrunk list, so it stays valid.
inline rc::Gen<FuzzCase> fuzz_case_gen(GenOptions opts = {}) {
  return rc::gen::exec([opts] {
    const auto seeds = *rc::gen::resize(
        100, rc::gen::container<std::vector<uint64_t>>(rc::gen::inRange<uint64_t>(0, uint64_t(1) << 62)));
    const uint64_t graph_seed = *rc::gen::inRange<uint64_t>(0, uint64_t(1) << 32);
    std::vector<uint64_t> nodes(seeds.begin(), seeds.begin() + std::ptrdiff_t(std::min<size_t>(seeds.size(), size_t(opts.max_nodes))));
    if (nodes.empty()) nodes.push_back(0);
    return generate_from_node_seeds(graph_seed, nodes, opts);
  });
}

inline void showValue(const FuzzCase& fc, std::ostream& os) {
  os << "inputs from seed " << fc.input_seed << "\n" << graph::print_graph(fc.graph);
}

}  // namespace kiln::fuzz
