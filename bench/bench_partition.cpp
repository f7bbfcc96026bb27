// Partitioner benchmarks (docs/partitioners.md): saved bytes of min-cut rematerialisation against the default
// partition on MLP-like joint graphs (L layers of x @ W followed by SiLU, the backward written by hand), and the
// time one partition takes. Counters: `default_saved_bytes`, `mincut_saved_bytes`, `saved_ratio` (min-cut /
// default; lower is better), `joint_nodes`.
//   build/bench/kiln-bench --benchmark_filter='aot/partition/' --benchmark_format=json
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "aot/partition.h"
#include "graph/text.h"

using namespace kiln;

namespace {

// The joint graph of an MLP with `layers` layers of width `width` over a batch of `batch`: a_i = silu(a_{i-1}
// @ W_i), forward output a_L; gradients for the input and every weight.
std::string mlp_silu_joint(int layers, int batch, int width) {
  std::string header = fmt::format("%primals_0: f32[{}, {}]", batch, width), body, grads;
  for (int i = 1; i <= layers; ++i) {
    header += fmt::format(", %primals_{}: f32[{}, {}]", i, width, width);
    std::string a = i == 1 ? "primals_0" : fmt::format("a{}", i - 1);
    body += fmt::format("  %z{0} = mm(%{1}, %primals_{0})\n  %s{0} = sigmoid(%z{0})\n  %a{0} = mul(%z{0}, %s{0})\n",
                        i, a);
  }
  header += fmt::format(", %tangents_1: f32[{}, {}]", batch, width);
  std::string da = "tangents_1";
  std::vector<std::string> grad_names(size_t(layers + 1));
  for (int i = layers; i >= 1; --i) {
    std::string a = i == 1 ? "primals_0" : fmt::format("a{}", i - 1);
    body += fmt::format(
        "  %oms{0} = sub(1.0, %s{0})\n  %ds{0} = mul(%s{0}, %oms{0})\n  %zds{0} = mul(%z{0}, %ds{0})\n"
        "  %dsilu{0} = add(%s{0}, %zds{0})\n  %dz{0} = mul(%{1}, %dsilu{0})\n"
        "  %at{0} = permute(%{2}, [1, 0])\n  %dw{0} = mm(%at{0}, %dz{0})\n"
        "  %wt{0} = permute(%primals_{0}, [1, 0])\n  %da{0} = mm(%dz{0}, %wt{0})\n",
        i, da, a);
    grad_names[size_t(i)] = fmt::format("dw{}", i);
    da = fmt::format("da{}", i);
  }
  grad_names[0] = da;
  for (const std::string& g : grad_names) grads += ", %" + g;
  return fmt::format("graph mlp_silu({}) {{\n{}  return %a{}{}\n}}\n", header, body, layers, grads);
}

void partition_mlp(benchmark::State& state) {
  const int layers = int(state.range(0));
  graph::Graph joint = graph::parse_graph(mlp_silu_joint(layers, 64, 256), "mlp_silu.kir");
  const aot::JointLayout layout{.num_primals = layers + 1, .num_forward_outputs = 1};
  const aot::Partition save_needed = aot::partition_joint(joint, layout, aot::PartitionPolicy::SaveNeeded);
  int64_t mincut_bytes = 0;
  for (auto _ : state) {
    aot::Partition p = aot::partition_joint(joint, layout, aot::PartitionPolicy::MinCut);
    mincut_bytes = p.saved_bytes;
    benchmark::DoNotOptimize(p);
  }
  state.counters["default_saved_bytes"] = double(save_needed.saved_bytes);
  state.counters["mincut_saved_bytes"] = double(mincut_bytes);
  state.counters["saved_ratio"] = double(mincut_bytes) / double(save_needed.saved_bytes);
  state.counters["joint_nodes"] = double(joint.num_op_nodes());
}
BENCHMARK(partition_mlp)->Name("aot/partition/mlp_silu")->Arg(2)->Arg(8)->Arg(32)->Unit(benchmark::kMicrosecond);

}  // namespace
