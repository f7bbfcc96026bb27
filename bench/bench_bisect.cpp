// bisect/<kind>/<nodes>: `kiln bisect` (bisect/bisect.h) on the generated chains of bisect/testing.h, 100 and
// 1000 op nodes, with a lowering, decomposition or fusion bug injected at the middle (KILN_INJECT). Counters:
// seconds (wall, search and node step), child_runs (forked trials), applications (of the culprit's site),
// site_runs (the culprit's search: within 2 + log2(applications)), ok (1 when the injected site and op were
// named). The kernel cache (KILN_CACHE_DIR) decides cold or warm figures: run twice for warm ones.
//   kiln-bench --benchmark_filter='bisect/' --benchmark_format=json
#include <benchmark/benchmark.h>

#include "bisect/bisect.h"
#include "bisect/testing.h"
#include "core/options.h"
#include "eager/philox.h"
#include "graph/inputs.h"
#include "graph/text.h"

namespace {

using namespace kiln;

void bisect_bench(benchmark::State& st, const std::string& kind, int nodes) {
  const bisect::InjectedGraph ig = bisect::injected_chain(kind, nodes);
  graph::Graph g = graph::parse_graph(ig.kir, "chain.kir");
  std::vector<Tensor> inputs = graph::seeded_inputs(g, 0);
  ScopedOption inject(Opt::Inject, ig.inject);
  bisect::BisectOptions o;
  o.timeout_s = 300;
  bisect::BisectReport r;
  for (auto _ : st) {
    manual_seed(0);
    r = bisect::bisect_graph(g, inputs, o, "chain.kir --seed 0");
  }
  st.counters["seconds"] = r.seconds;
  st.counters["child_runs"] = r.child_runs;
  st.counters["applications"] = r.culprit ? double(r.culprit->applications) : 0;
  st.counters["site_runs"] = r.culprit ? r.culprit->runs : 0;
  st.counters["ok"] = r.culprit && r.culprit->site == ig.site && r.divergence && r.divergence->value == ig.diverging;
}

[[maybe_unused]] const bool registered = [] {
  for (const std::string& kind : bisect::injection_kinds())
    for (int nodes : {100, 1000})
      benchmark::RegisterBenchmark(fmt::format("bisect/{}/{}", kind, nodes).c_str(),
                                   [kind, nodes](benchmark::State& st) { bisect_bench(st, kind, nodes); })
          ->Iterations(1)
          ->Unit(benchmark::kSecond)
          ->UseRealTime();
  return true;
}();

}  // namespace
