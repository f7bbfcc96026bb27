// The libFuzzer targets' inputs (fuzz/*_fuzzer.cpp, run by ci/fuzz.sh and by fuzzing engines such as
// ClusterFuzzLite and OSS-Fuzz) as kiln cases: `kiln fuzz import-crash TARGET INPUT -o R.repro` turns an input an
// engine reported into the graph and inputs it encodes and, when it fails here, a minimized repro. The graph
// target's decoding (its bytes are the generator's choices, with graph_fuzzer_options) is defined here once, for
// both the target and the command.
#pragma once
#include <string>
#include <vector>

#include "fuzz/check.h"
#include "fuzz/generator.h"

namespace kiln::fuzz {

// What graph-fuzzer generates with: small graphs and values, so each input runs in milliseconds.
GenOptions graph_fuzzer_options();

// The targets whose inputs encode a graph: "graph" (graph-fuzzer: generator choices) and "kir" (kir-fuzzer: .kir
// text). "repro" (repro-fuzzer) inputs are repro files: their findings are in the repro parser, and the input
// itself is the reproducer (`kiln repro run INPUT`); decode_engine_input says so.
struct EngineCase {
  graph::Graph graph;
  std::vector<Tensor> inputs;
  uint64_t random_seed = 0;  // random ops start here
};
// A kiln::Error (exit 2) for an unknown target, a repro target, or a kir input that does not parse or verify (a
// parser finding: its message says how to reproduce it).
EngineCase decode_engine_input(const std::string& target, const std::string& bytes, const std::string& where);

// Checks the case on opts.backend as `kiln fuzz` does (isolated, the comparator against the fp64 reference) and,
// when it fails, minifies it into the repro file `repro_path`. `failed` false: it passes here (nothing written).
struct ImportedCrash {
  FailureSignature failure;
  MinifiedFinding minified;
  bool failed() const { return failure.failed(); }
};
ImportedCrash import_engine_case(const EngineCase& c, const CheckOptions& opts, const std::string& repro_path);

}  // namespace kiln::fuzz
