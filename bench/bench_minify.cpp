// minify/<kind>/<nodes>: the minifier on generated graphs (minifier/testing.h) of 100, 1000 and 10000 op nodes
// over 256x256 f32 tensors (64K elements; 10000 nodes hold 2.5 GB of f32 intermediates, 5 GB in fp64), with
// one relu given a compile error, a crash or an accuracy bug by the inductor's KILN_INJECT (KILN_BENCH_BACKEND
// picks another backend, e.g. inject_test: the interpreter with the same injected relu). Counters: seconds
// (wall), oracle_calls, result_ops (1 when the relu was found), peak_rss_mb (this process, the minifier) and
// child_peak_rss_mb (the largest forked candidate). ru_maxrss only grows, so run one size per process for
// exact peaks: kiln-bench --benchmark_filter='minify/accuracy/10000' --benchmark_format=json
// minify/cmd/<nodes>: the same graphs judged by a shell command instead (`kiln minify --cmd`, no injection):
// `grep` for the relu in the candidate's .kir, exit 1 when it is there; seconds_per_call is the cost of one
// candidate (written to its own directory with its inputs, a shell started), against the backends' above.
// minify/torch/<nodes>: judged by PyTorch (`kiln minify --oracle torch`) with the stand-in backend that lowers
// relu wrongly (tests/torch_backends/standins.py:wrong_relu); KILN_BENCH_PYTHON names the Python with torch
// (default python3). seconds_per_call is one candidate through a persistent worker (eager, torch.fx, the fp64
// reference), worker_starts how many Python starts that took.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <cstdlib>
#include <filesystem>
#include <optional>

#include "core/options.h"
#include "graph/inputs.h"
#include "minifier/inject_backend.h"
#include "minifier/minifier.h"
#include "minifier/testing.h"

namespace {

using namespace kiln;

void minify_bench(benchmark::State& st, const std::string& kind, int nodes) {
  minify::register_inject_test_backend();
  std::optional<ScopedOption> inject;  // minify/cmd: the command is the bug
  const bool external = kind == "cmd" || kind == "torch";
  if (!external) inject.emplace(Opt::Inject, "relu:" + kind);
  minify::TestGraph t = minify::relu_test_graph(nodes, 1, 256, 256);
  std::vector<Tensor> inputs = graph::seeded_inputs(t.graph, 0);
  std::string dir = (std::filesystem::temp_directory_path() / "kiln_bench_minify").string();
  std::filesystem::create_directories(dir);
  minify::MinifyOptions o;
  const char* backend = std::getenv("KILN_BENCH_BACKEND");
  o.backend = backend ? backend : "inductor";
  if (kind == "cmd") {
    o.command = R"(grep -q "= relu(" "$KILN_CANDIDATE" && exit 1; exit 0)";
  }
  if (kind == "torch") {
    o.torch.enabled = true;
    o.torch.backend = KILN_SOURCE_DIR "/tests/torch_backends/standins.py:wrong_relu";
    const char* python = std::getenv("KILN_BENCH_PYTHON");
    if (python) o.torch.python = python;
  }
  o.output = dir + "/" + kind + std::to_string(nodes) + (external ? ".min" : ".repro");
  o.config = minify::current_config();
  o.progress = std::getenv("KILN_BENCH_PROGRESS") != nullptr;  // one line per accepted step on stderr
  minify::MinifyResult r;
  for (auto _ : st) r = minify::minify(t.graph, inputs, o);
  rusage self{}, children{};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  st.counters["seconds"] = r.stats.seconds;
  st.counters["oracle_calls"] = r.stats.oracle_calls;
  st.counters["seconds_per_call"] = r.stats.oracle_calls ? r.stats.seconds / r.stats.oracle_calls : 0;
  st.counters["result_ops"] = r.graph.num_op_nodes();
  st.counters["reverified"] = r.reverified;
  if (kind == "torch") st.counters["worker_starts"] = r.command.worker_starts;
  st.counters["peak_rss_mb"] = double(self.ru_maxrss) / 1024;
  st.counters["child_peak_rss_mb"] = double(children.ru_maxrss) / 1024;
}

[[maybe_unused]] const bool registered = [] {
  for (const char* kind : {"compile_error", "crash", "accuracy", "cmd", "torch"})
    for (int nodes : {100, 1000, 10000}) {
      if (std::string(kind) == "torch" && nodes == 10000) continue;  // 5 GB of fp64 in PyTorch too
      benchmark::RegisterBenchmark(fmt::format("minify/{}/{}", kind, nodes).c_str(),
                                   [kind, nodes](benchmark::State& st) { minify_bench(st, kind, nodes); })
          ->Iterations(1)
          ->Unit(benchmark::kSecond)
          ->UseRealTime();
    }
  return true;
}();

}  // namespace
