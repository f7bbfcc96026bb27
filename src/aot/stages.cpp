// The stages of AOT autograd and the runner that checks each one (stages.h).
#include "aot/stages.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <set>

#include "aot/functionalize.h"
#include "core/debug_dir.h"
#include "core/error.h"
#include "core/files.h"
#include "core/log.h"
#include "core/options.h"
#include "core/trace.h"
#include "graph/storage_model.h"
#include "graph/text.h"
#include "graph/verify.h"

namespace kiln::aot {

using graph::Graph;

namespace {

using Graphs = std::vector<std::pair<std::string, const Graph*>>;

// ---------------------------------------------------------------- the stages

// expand: nodes that need a gradient through an op without a VJP become their decomposition, before
// functionalizing, since a decomposition may write in place (batch_norm's running statistics).
void expand(AotState& s, const AotConfig&) { s.graph = expand_ops_without_vjp(s.graph, s.requires_grad); }

// Outputs of `g` that alias an input functionalize found mutated: returned as views of that input after the
// copy-back (an in-place op's result), as eager returns them.
std::vector<AotGraphs::OutputAlias> aliases_of_mutated_inputs(const Graph& g, const std::vector<std::pair<int, int>>& mutations) {
  std::vector<AotGraphs::OutputAlias> aliases;
  if (mutations.empty()) return aliases;
  graph::StorageModel model(g);
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    graph::ValueId owner = model.owner(g.outputs()[k]);
    for (auto [input, output] : mutations) {
      graph::ValueId in = g.inputs()[size_t(input)];
      if (owner != model.owner(in)) continue;
      StorageSpan o = model.span(g.outputs()[k]), i = model.span(in);
      aliases.push_back({int(k), input, o.sizes, o.strides, o.offset - i.offset});
    }
  }
  return aliases;
}

// functionalize: in-place ops and writes through views -> a functional graph whose extra outputs are the new
// values of the inputs it wrote (copied back after each call).
void functionalize_stage(AotState& s, const AotConfig&) {
  FunctionalGraph f = functionalize(s.graph);
  s.out.mutations = f.mutations;
  s.out.output_aliases = aliases_of_mutated_inputs(s.graph, f.mutations);
  s.graph = std::move(f.graph);
}

// No node mutates; each input the graph wrote has exactly one new value among the outputs, each after the
// original outputs; no other input has one.
std::optional<std::string> functional_and_every_write_kept(const Graph& g, const AotState& after) {
  if (has_mutations(after.graph)) return "the graph still has an in-place node";
  graph::StorageModel model(g);
  std::set<int> recorded;
  for (auto [input, output] : after.out.mutations) {
    if (input < 0 || size_t(input) >= g.inputs().size() || !recorded.insert(input).second)
      return fmt::format("the copy-back list names input {} twice or out of range", input);
    if (output < int(g.outputs().size()) || size_t(output) >= after.graph.outputs().size())
      return fmt::format("the new value of input {} is output {}, not one after the graph's {} outputs", input, output,
                         g.outputs().size());
  }
  for (size_t i = 0; i < g.inputs().size(); ++i)
    if (model.written_in_place(g.inputs()[i]) != recorded.count(int(i)))
      return fmt::format("input {} ({}) is {} in place but {} in the copy-back list", i, g.value(g.inputs()[i]).name,
                         recorded.count(int(i)) ? "not written" : "written", recorded.count(int(i)) ? "is" : "not");
  if (after.graph.outputs().size() != g.outputs().size() + recorded.size())
    return fmt::format("{} outputs, not the graph's {} and one per written input ({})", after.graph.outputs().size(),
                       g.outputs().size(), recorded.size());
  return std::nullopt;
}

// rng: random ops -> philox_rand at explicit offsets, so the forward and a recompute in the backward draw the
// same numbers; the graph then takes rng_seed and rng_offset after its own inputs.
void rng(AotState& s, const AotConfig&) {
  RngFunctional r = functionalize_rng(s.graph);
  s.out.rng = r.plan;
  KILN_LOG(LogChannel::Partitioner, "random ops of {}: {}", s.graph.name, r.plan.note);
  s.graph = std::move(r.graph);
  s.requires_grad.resize(s.graph.inputs().size(), false);  // rng_seed, rng_offset
}

// joint: the forward and the backward as one graph, from the op table's VJP rules.
void joint(AotState& s, const AotConfig& config) {
  s.out.joint = build_joint(s.graph, s.requires_grad, config.joint);
}

std::optional<std::string> joint_layout_holds(const Graph&, const AotState& after) {
  const JointGraph& j = after.out.joint;
  const size_t inputs = size_t(j.layout.num_primals) + j.tangent_of.size();
  const size_t outputs = size_t(j.layout.num_forward_outputs) + j.grad_primals.size();
  if (j.graph.inputs().size() != inputs || j.graph.outputs().size() != outputs)
    return fmt::format("the joint graph has {} inputs and {} outputs; its layout says {} and {}", j.graph.inputs().size(),
                       j.graph.outputs().size(), inputs, outputs);
  return std::nullopt;
}

// transform: the backend's rewrite of the joint graph (aot_eager_decomp_partition: decompositions), if any.
void transform(AotState& s, const AotConfig& config) {
  if (config.transform_joint) s.out.joint.graph = config.transform_joint(s.out.joint.graph);
  KILN_LOG(LogChannel::AotJointGraph, "{} joint graph of {}:\n{}", config.backend, s.graph.name,
           graph::print_graph(s.out.joint.graph));
}

// partition: the joint graph -> a forward graph that also returns the values the backward needs, and the
// backward graph (save-needed or min-cut).
void partition(AotState& s, const AotConfig& config) {
  s.out.partition = partition_joint(s.out.joint.graph, s.out.joint.layout, config.policy, config.wrong_partition);
  const Partition& p = s.out.partition;
  KILN_LOG(LogChannel::AotGraphs, "{} forward graph of {} ({} saved values, {} bytes):\n{}", config.backend, s.graph.name,
           p.num_saved, p.saved_bytes, graph::print_graph(p.forward));
  KILN_LOG(LogChannel::AotGraphs, "{} backward graph of {}:\n{}", config.backend, s.graph.name, graph::print_graph(p.backward));
}

// The forward returns the forward outputs then the saved values; the backward takes the saved values then the
// tangents and returns one gradient per primal that gets one.
std::optional<std::string> partition_layout_holds(const Graph&, const AotState& after) {
  const Partition& p = after.out.partition;
  const JointGraph& j = after.out.joint;
  const size_t forward_outputs = size_t(j.layout.num_forward_outputs + p.num_saved);
  const size_t backward_inputs = size_t(p.num_saved) + j.tangent_of.size();
  if (p.forward.inputs().size() != size_t(j.layout.num_primals) || p.forward.outputs().size() != forward_outputs)
    return fmt::format("the forward graph has {} inputs and {} outputs, not {} and {}", p.forward.inputs().size(),
                       p.forward.outputs().size(), j.layout.num_primals, forward_outputs);
  if (p.backward.inputs().size() != backward_inputs || p.backward.outputs().size() != j.grad_primals.size())
    return fmt::format("the backward graph has {} inputs and {} outputs, not {} and {}", p.backward.inputs().size(),
                       p.backward.outputs().size(), backward_inputs, j.grad_primals.size());
  return std::nullopt;
}

Graphs the_graph(const AotState& s) { return {{"", &s.graph}}; }
Graphs the_joint(const AotState& s) { return {{"", &s.out.joint.graph}}; }
Graphs the_halves(const AotState& s) {
  return {{"forward", &s.out.partition.forward}, {"backward", &s.out.partition.backward}};
}

// ---------------------------------------------------------------- the runner

// KILN_DEBUG_DIR/aot/NNN_<graph>/: each stage's graphs, then joint.kir, forward.kir and backward.kir.
class StageDump {
 public:
  explicit StageDump(const Graph& g) : dir_(claim_debug_dir("aot", g.name)) {}
  // Also the trace's artifact `file` (KILN_TRACE).
  void write(const std::string& file, const Graph& g) const {
    if (!dir_.empty()) graph::save_graph(g, (dir_ / file).string());
    trace_artifact("aot " + file, "kir", [&] { return graph::print_graph(g); });
  }

 private:
  std::filesystem::path dir_;
};

}  // namespace

std::vector<AotStage> aot_stages() {
  return {
      {"expand", expand, nullptr, the_graph},
      {"functionalize", functionalize_stage, functional_and_every_write_kept, the_graph, /*invariant_reads_input=*/true},
      {"rng", rng, nullptr, the_graph},
      {"joint", joint, joint_layout_holds, the_joint},
      {"transform", transform, joint_layout_holds, the_joint},
      {"partition", partition, partition_layout_holds, the_halves},
  };
}

AotGraphs run_aot_stages(const Graph& g, const std::vector<bool>& requires_grad, const AotConfig& config,
                         const std::vector<AotStage>& stages) {
  using Clock = std::chrono::steady_clock;
  AotState state{g, requires_grad, {}};
  const StageDump dump(g);
  BisectScope bisection(config.bisect);
  for (size_t i = 0; i < stages.size(); ++i) {
    const AotStage& stage = stages[i];
    const auto start = Clock::now();
    const Graph input = stage.invariant_reads_input ? state.graph : Graph{};
    {
      TraceSpan span("aot", stage.name);
      stage.run(state, config);
    }
    const Graphs graphs = stage.graphs ? stage.graphs(state) : Graphs{};
    for (const auto& [name, graph] : graphs) {
      const std::string what = name.empty() ? stage.name : stage.name + " (" + name + ")";
      try {
        graph::verify_graph(*graph, fmt::format("<aot: after {}>", what));
      } catch (const Error& e) {
        internal_fail("AOT stage {} of graph {} produced an invalid graph: {}", what, g.name, e.what());
      }
      dump.write(fmt::format("{:02}_{}{}.kir", i + 1, stage.name, name.empty() ? "" : "_" + name), *graph);
    }
    if (stage.invariant)
      if (std::optional<std::string> wrong = stage.invariant(input, state))
        internal_fail("AOT stage {} of graph {} broke its invariant: {}", stage.name, g.name, *wrong);
    KILN_LOG(LogChannel::Passes, "aot: graph {}: stage {} ({:.2f} ms)", g.name, stage.name,
             std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  dump.write("joint.kir", state.out.joint.graph);
  dump.write("forward.kir", state.out.partition.forward);
  dump.write("backward.kir", state.out.partition.backward);
  return std::move(state.out);
}

}  // namespace kiln::aot
