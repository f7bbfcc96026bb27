// bisect/<kind>/<nodes>: `kiln bisect` (bisect/bisect.h) on the generated chains of bisect/testing.h, 100 and
// 1000 op nodes, with a lowering, decomposition or fusion bug injected at the middle (KILN_INJECT). Counters:
// seconds (wall, search and node step), child_runs (forked trials), applications (of the culprit's site),
// site_runs (the culprit's search), site_runs_bound (the target for it: 2 + ceil(log2(applications))),
// within_bound (1 when site_runs <= site_runs_bound), ok (1 when the injected site and op were named). The
// training kinds (vjp, partition: bugs of the AOT rungs, which count no site) are bisect/vjp/<nodes> and
// bisect/partition/<nodes>: ok when the stage and the first diverging node are the injected ones. The kernel
// cache (KILN_CACHE_DIR) decides cold or warm figures: run twice for warm ones.
//   kiln-bench --benchmark_filter='bisect/' --benchmark_format=json
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>

#include "bisect/bisect.h"
#include "bisect/testing.h"
#include "core/options.h"
#include "eager/philox.h"
#include "graph/inputs.h"
#include "graph/text.h"

namespace {

using namespace kiln;

bool is_training_kind(const std::string& kind) {
  const auto& k = bisect::training_injection_kinds();
  return std::find(k.begin(), k.end(), kind) != k.end();
}

void bisect_bench(benchmark::State& st, const std::string& kind, int nodes) {
  const bool training = is_training_kind(kind);
  const bisect::InjectedGraph ig = training ? bisect::injected_training_chain(kind, nodes) : bisect::injected_chain(kind, nodes);
  graph::Graph g = graph::parse_graph(ig.kir, "chain.kir");
  std::vector<Tensor> inputs = graph::seeded_inputs(g, 0);
  ScopedOption inject(Opt::Inject, ig.inject);
  bisect::BisectOptions o;
  o.timeout_s = 300;
  bisect::BisectReport r;
  for (auto _ : st) {
    manual_seed(0);
    r = bisect::bisect_graph(g, inputs, o, RunLine{.file = "chain.kir", .seed = 0});
  }
  st.counters["seconds"] = r.seconds;
  st.counters["child_runs"] = r.child_runs;
  st.counters["applications"] = r.culprit ? double(r.culprit->applications) : 0;
  st.counters["site_runs"] = r.culprit ? r.culprit->runs : 0;
  const int64_t applications = r.culprit ? std::max<int64_t>(r.culprit->applications, 1) : 1;
  const int bound = 2 + int(std::ceil(std::log2(double(applications))));
  st.counters["site_runs_bound"] = bound;
  st.counters["within_bound"] = !r.culprit || r.culprit->runs <= bound;
  st.counters["ok"] = training ? r.stage == ig.site_value && r.divergence && r.divergence->node.find(ig.diverging) != std::string::npos
                               : r.culprit && r.culprit->site == ig.site && r.divergence && r.divergence->value == ig.diverging;
}

[[maybe_unused]] const bool registered = [] {
  std::vector<std::string> kinds = bisect::injection_kinds();
  for (const std::string& k : bisect::training_injection_kinds()) kinds.push_back(k);
  for (const std::string& kind : kinds)
    for (int nodes : {100, 1000})
      benchmark::RegisterBenchmark(fmt::format("bisect/{}/{}", kind, nodes).c_str(),
                                   [kind, nodes](benchmark::State& st) { bisect_bench(st, kind, nodes); })
          ->Iterations(1)
          ->Unit(benchmark::kSecond)
          ->UseRealTime();
  return true;
}();

}  // namespace
