// `kiln import` speed: import_pt2 (zip directory, JSON parse, payloads, mapping and shape inference of every
// node, the final verify) on tests/fixtures/pt2/chain1000.pt2, a 1250-node graph exported by PyTorch 2.11
// (250 blocks of mul, add, tanh with two indexings of the weights; entries deflated), and on the transformer
// fixture. Counters: `nodes`, `nodes/s`; issue 21's target is a 1000-node archive in under 1 s.
//   build/bench/kiln-bench --benchmark_filter='import/' --benchmark_format=json
#include <benchmark/benchmark.h>

#include <string>

#include "import/pt2.h"

namespace {

void import_fixture(benchmark::State& state, const std::string& stem) {
  const std::string path = std::string(KILN_SOURCE_DIR) + "/tests/fixtures/pt2/" + stem + ".pt2";
  int nodes = 0;
  for (auto _ : state) {
    kiln::importer::ImportedModel m = kiln::importer::import_pt2(path);
    nodes = m.graph.num_op_nodes();
    benchmark::DoNotOptimize(m);
  }
  state.counters["nodes"] = nodes;
  state.counters["nodes/s"] = benchmark::Counter(double(nodes) * double(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_ImportChain1000(benchmark::State& state) { import_fixture(state, "chain1000"); }
void BM_ImportTransformer(benchmark::State& state) { import_fixture(state, "transformer"); }

}  // namespace

BENCHMARK(BM_ImportChain1000)->Name("import/chain1000")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ImportTransformer)->Name("import/transformer")->Unit(benchmark::kMillisecond);
