// Engine inputs as kiln cases (engine_input.h).
#include "fuzz/engine_input.h"

#include "core/error.h"
#include "core/escape.h"
#include "eager/philox.h"
#include "fuzz/choices.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/text.h"
#include "graph/verify.h"

namespace kiln::fuzz {

GenOptions graph_fuzzer_options() {
  GenOptions opts;
  opts.max_nodes = 8;
  opts.max_numel = 1 << 10;
  return opts;
}

EngineCase decode_engine_input(const std::string& target, const std::string& bytes, const std::string& where) {
  EngineCase c;
  if (target == "graph") {
    ByteChoices choices(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    FuzzCase fc = generate(choices, graph_fuzzer_options());
    c.graph = std::move(fc.graph);
    c.inputs = std::move(fc.inputs);
    c.random_seed = fc.input_seed;
    return c;
  }
  if (target == "kir") {
    try {
      // As kir-fuzzer parses it: relative .npy references reach no file.
      c.graph = graph::parse_graph(bytes, "/nonexistent/fuzz.kir");
      graph::verify_graph(c.graph, where);
    } catch (const Error& e) {
      fail("{}: the input is not a valid graph ({}): a kir-fuzzer finding on such an input is in the parser or the "
           "verifier, and the input itself reproduces it: kiln verify {}", terminal_safe(where), e.what(),
           shell_quote(where));
    }
    c.inputs = graph::seeded_inputs(c.graph, 0);
    return c;
  }
  if (target == "repro")
    fail("{}: a repro-fuzzer input is a repro file; its findings are in the repro parser and the input itself "
         "reproduces them: kiln repro run {}", terminal_safe(where), shell_quote(where));
  fail("import-crash: unknown target '{}' (known: graph, kir, repro)", terminal_safe(target));
}

ImportedCrash import_engine_case(const EngineCase& c, const CheckOptions& opts, const std::string& repro_path) {
  NoGradGuard no_grad;
  manual_seed(c.random_seed);
  ComparisonBaselines b;
  try {
    b = comparison_baselines(c.graph, c.inputs);
  } catch (const Error& e) {
    fail("the fp64 reference interpreter fails on the decoded graph ({}): that is the finding; kiln run the graph "
         "with --backend eager to see it", e.what());
  }
  CheckJob job{&c.graph, &c.inputs, &b.eager, &b.fp64, {}, c.random_seed};
  ImportedCrash out;
  out.failure = check_isolated({job}, opts).front();
  if (out.failure.failed()) out.minified = minify_finding(job, out.failure, opts, repro_path);
  return out;
}

}  // namespace kiln::fuzz
