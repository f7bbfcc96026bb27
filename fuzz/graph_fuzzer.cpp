// Structure-aware libFuzzer target: the input bytes are the choices of kiln's graph generator (fuzz/choices.h
// ByteChoices, fuzz/generator.h), so every input is a valid graph and libFuzzer's mutations change decisions
// (an op, a shape, a dtype) rather than characters. Each graph must verify, round-trip through .kir, run on
// the fp64 reference, and run on the inductor with outputs the comparator accepts (eager expected, fp64 the
// reference). Anything else (a kiln::Error from the backend, a
// mismatch, a crash, a sanitizer report) is a finding: the graph is printed and the target aborts. The same
// entry runs under AFL++ and OSS-Fuzz/ClusterFuzz. Build and run: ci/fuzz.sh. An input it reports becomes a
// minimized repro with `kiln fuzz import-crash graph INPUT -o R.repro` (fuzz/engine_input.h).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/backends.h"
#include "eager/philox.h"
#include "fuzz/engine_input.h"
#include "fuzz/generator.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "graph/verify.h"
#include "ops/api.h"

namespace {

[[noreturn]] void finding(const kiln::graph::Graph& g, const std::string& what) {
  std::fprintf(stderr, "graph fuzzer finding: %s\n%s\n", what.c_str(), kiln::graph::print_graph(g).c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  static const std::string backend = "inductor";
  fuzz::ByteChoices choices(data, size);
  fuzz::FuzzCase fc = fuzz::generate(choices, fuzz::graph_fuzzer_options());  // as `kiln fuzz import-crash` decodes it
  const graph::Graph& g = fc.graph;
  std::string text = graph::print_graph(g);
  try {
    graph::verify_graph(g, "generated.kir");
    if (graph::print_graph(graph::parse_graph(text, "generated.kir")) != text) finding(g, "the .kir round trip changed it");
  } catch (const Error& e) {
    finding(g, std::string("the generated graph is invalid: ") + e.what());
  }
  NoGradGuard no_grad;
  std::vector<Tensor> inputs = fc.inputs, outs;
  ComparisonBaselines baselines;
  try {
    manual_seed(fc.input_seed);
    baselines = comparison_baselines(g, inputs);
  } catch (const Error& e) {
    finding(g, std::string("the fp64 reference fails on a generated graph: ") + e.what());
  }
  try {
    manual_seed(fc.input_seed);
    outs = find_backend(backend)(g, graph::copy_inputs(inputs));
  } catch (const Error& e) {
    finding(g, "backend " + backend + " fails: " + e.what());
  }
  CompareVerdict v = compare_to_baselines(baselines, outs);  // decision 6: eager is expected, fp64 the reference
  if (!v.ok) finding(g, "backend " + backend + " disagrees with the fp64 reference: " + v.str());
  return 0;
}
