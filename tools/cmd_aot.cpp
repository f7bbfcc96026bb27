// `kiln aot G.kir [-o DIR] [--partition default|min-cut]`: builds the joint graph of G (its inputs marked
// `grad` get gradients), partitions it, and prints the three graphs or writes DIR/joint.kir, forward.kir and
// backward.kir (atomically). Errors in the file are kiln::Errors with file:line:col (exit 2).
#include "tools/cmd_aot.h"

#include <fmt/format.h>

#include "aot/compiled.h"
#include "api/backends.h"
#include "api/pipeline.h"
#include "core/files.h"
#include "graph/text.h"
#include "graph/verify.h"
#include "tools/cli_checks.h"

namespace kiln::cli {
namespace {

struct AotArgs {
  std::string file;
  std::string out_dir;
  std::string partition = "default";
};

int run_aot(const AotArgs& a) {
  graph::Graph g = graph::load_graph(a.file);
  graph::verify_graph(g, a.file);
  std::vector<bool> requires_grad;
  bool any = false;
  for (graph::ValueId in : g.inputs()) any |= requires_grad.emplace_back(g.value(in).requires_grad);
  KILN_CHECK(any, "{}: no input of graph {} requires grad; mark the inputs to differentiate with `grad` "
             "(e.g. `%w: f32[4] grad`)", a.file, g.name);
  aot::AotConfig config = aot_backend_config("aot_eager", {.repro_stage = "aot"});
  config.policy = a.partition == "min-cut" ? aot::PartitionPolicy::MinCut : aot::PartitionPolicy::SaveNeeded;
  aot::AotGraphs gs = aot::aot_graphs(g, requires_grad, config);
  const aot::Partition& p = gs.partition;
  const std::pair<const char*, const graph::Graph*> files[] = {
      {"joint.kir", &gs.joint.graph}, {"forward.kir", &p.forward}, {"backward.kir", &p.backward}};
  if (a.out_dir.empty()) {
    for (const auto& [name, graph] : files) fmt::print("# {}\n{}\n", name, graph::print_graph(*graph));
  } else {
    create_output_directory(a.out_dir);
    for (const auto& [name, graph] : files) graph::save_graph(*graph, confined_path(a.out_dir, name, "an output").string());
  }
  fmt::print("{}: {} primals, {} tangents, {} gradients; partition {}: {} saved values ({} bytes){}\n", a.file,
             gs.joint.layout.num_primals, gs.joint.tangent_of.size(), gs.joint.grad_primals.size(), a.partition,
             p.num_saved, p.saved_bytes, a.out_dir.empty() ? "" : "; wrote joint.kir, forward.kir, backward.kir in " + a.out_dir);
  return 0;
}

}  // namespace

void add_aot_commands(CLI::App& app, std::map<std::string, Runner>& runners) {
  static AotArgs args;
  auto* cmd = app.add_subcommand("aot", "AOT autograd on a .kir graph: the joint graph (inputs marked `grad` get "
                                        "gradients), the forward and the backward graph");
  cmd->add_option("graph", args.file, "the .kir file")->required();
  add_output_option(*cmd, args.out_dir, "write joint.kir, forward.kir and backward.kir into this directory "
                                       "(default: print them)", /*old_out_alias=*/true);
  cmd->add_option("--partition", args.partition, "the partitioner: default (save what the backward reads) or min-cut")
      ->check(CLI::IsMember({"default", "min-cut"}));
  runners["aot"] = [] { return run_aot(args); };
}

}  // namespace kiln::cli
