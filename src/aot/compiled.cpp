// Compiled training (compiled.h): the graphs of a training compile, the CompiledBackward node, and the
// compiled function that picks the inference or the training path per call.
#include "aot/compiled.h"

#include <atomic>
#include <map>
#include <mutex>
#include <optional>

#include "aot/stages.h"
#include "autograd/autograd.h"
#include "core/log.h"
#include "core/options.h"
#include "core/trace.h"
#include "ops/api.h"
#include "ops/dispatch.h"

namespace kiln::aot {

using graph::Graph;

AotGraphs aot_graphs(const Graph& g, const std::vector<bool>& requires_grad, const AotConfig& config) {
  return run_aot_stages(g, requires_grad, config, aot_stages());
}

namespace {

// One training compile: the graphs, the forward program, and the backward program once compiled.
struct Training {
  AotGraphs graphs;
  Program forward;
  ProgramCompiler compile;
  std::once_flag backward_once;
  Program backward;
  int num_outputs = 0;  // the user's outputs (the forward graph's first outputs)
  CompileId compile_id;  // the trace's (core/trace.h): the backward compiles under the forward's id
  std::string graph_name;

  const Program& backward_program() {
    std::call_once(backward_once, [&] {
      CompileScope traced("backward", graph_name, "", compile_id);
      try {
        backward = compile(graphs.partition.backward);
      } catch (const std::exception& e) {
        traced.fail("compile_error", e.what());
        throw;
      }
    });
    return backward;
  }
};

// The one autograd node of a compiled training call: runs the compiled backward on the saved values and the
// gradients of the differentiable outputs.
class CompiledBackward : public Node {
 public:
  CompiledBackward(std::shared_ptr<Training> t, std::vector<Tensor> saved) : t_(std::move(t)), saved_(std::move(saved)) {
    for (const Tensor& s : saved_) versions_.push_back(s.storage() ? s.storage()->version() : 0);
  }

  std::vector<Tensor> apply(const std::vector<Tensor>& grads) override {
    KILN_CHECK(!released_, "backward through {} a second time: its saved values were freed after the first "
               "backward; pass retain_graph=true to the first backward if you need to run it again", name());
    KILN_CHECK(!grad_mode_enabled(), "{}: create_graph (a differentiable backward) through a compiled function is "
               "not supported; use the eager backend for higher-order gradients", name());
    for (size_t i = 0; i < saved_.size(); ++i)
      KILN_CHECK(!saved_[i].storage() || saved_[i].storage()->version() == versions_[i],
                 "{}: saved value {} ({}) was modified by an in-place operation after the forward; clone it before "
                 "modifying it", name(), i, saved_[i].str());
    std::vector<Tensor> inputs = saved_;
    inputs.insert(inputs.end(), grads.begin(), grads.end());
    return t_->backward_program()(inputs);
  }
  std::string name() const override { return "CompiledFunctionBackward(" + t_->graphs.joint.graph.name + ")"; }
  void release_saved() override {
    released_ = true;
    saved_.clear();
  }

 private:
  std::shared_ptr<Training> t_;
  std::vector<Tensor> saved_;
  std::vector<uint64_t> versions_;
  bool released_ = false;
};

// Outputs get handles of their own: an output that is an input (or another output) becomes a view of it, so
// giving it history leaves the input's alone.
void own_handles(std::vector<Tensor>& outs, const std::vector<Tensor>& inputs) {
  for (size_t i = 0; i < outs.size(); ++i) {
    bool shared = false;
    for (const Tensor& in : inputs) shared = shared || outs[i].same(in);
    for (size_t k = 0; k < i; ++k) shared = shared || outs[i].same(outs[k]);
    if (shared) outs[i] = make_view(outs[i], outs[i].sizes(), outs[i].strides(), outs[i].offset());
  }
}

class AotFunction {
 public:
  // The inference program is compiled now, so a graph that does not compile fails here as before AOT (capture's
  // suppress_errors relies on it); the training graphs on the first call that needs them.
  // The training compile, on a later call, keeps the compile id of the compile that made this function (the
  // trace's compile id of the captured function or graph, core/trace.h).
  AotFunction(const Graph& g, AotConfig config)
      : graph_(g), config_(std::move(config)), compile_id_(current_compile_id()) {
    inference_ = config_.compile(graph_);
  }

  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) {
    std::vector<bool> mask(inputs.size(), false);
    bool any = false;
    if (grad_mode_enabled())
      for (size_t i = 0; i < inputs.size(); ++i) any |= mask[i] = inputs[i].requires_grad() && is_floating(inputs[i].dtype());
    if (!any) return inference()(inputs);
    return run_training(training(mask), inputs);
  }

 private:
  const Program& inference() const { return inference_; }

  std::shared_ptr<Training> training(const std::vector<bool>& mask) {
    std::lock_guard lock(mutex_);
    std::shared_ptr<Training>& t = trainings_[mask];
    if (!t) {
      CompileScope traced("training", graph_.name, "", compile_id_);
      auto fresh = std::make_shared<Training>();
      fresh->compile_id = traced.id();
      fresh->graph_name = graph_.name;
      try {
        fresh->graphs = aot_graphs(graph_, mask, config_);
        fresh->compile = config_.compile_halves ? config_.compile_halves : config_.compile;
        fresh->forward = fresh->compile(fresh->graphs.partition.forward);
      } catch (const std::exception& e) {
        traced.fail("compile_error", e.what());
        throw;
      }
      fresh->num_outputs = int(graph_.outputs().size());
      t = fresh;
    }
    return t;
  }

  std::vector<Tensor> run_training(const std::shared_ptr<Training>& t, const std::vector<Tensor>& inputs) {
    std::vector<Tensor> detached;
    for (const Tensor& in : inputs) detached.push_back(history_free_alias(in));
    for (Tensor& state : take_rng_inputs(t->graphs.rng)) detached.push_back(std::move(state));
    std::vector<Tensor> outs;
    {
      NoGradGuard no_grad;
      outs = t->forward(detached);
    }
    const JointLayout& layout = t->graphs.joint.layout;
    std::vector<Tensor> saved(outs.begin() + layout.num_forward_outputs, outs.end());
    // A saved value may be the very tensor a user output is (relu's result, saved for its backward and returned):
    // the node keeps handles of its own, or the output's history (this node) would hold the node itself, a cycle
    // that kept every training step's graphs and activations alive.
    for (Tensor& s : saved) s = history_free_alias(s);
    // Saved values that share an input's storage are taken before the copy-back writes it (as eager's in-place
    // nodes save a snapshot of `self`).
    for (Tensor& s : saved)
      for (auto [input, output] : t->graphs.mutations)
        if (s.storage() && s.storage() == inputs[size_t(input)].storage()) {
          NoGradGuard no_grad;
          s = clone(s);
        }
    outs.resize(size_t(layout.num_forward_outputs));
    own_handles(outs, detached);
    auto node = std::make_shared<CompiledBackward>(t, std::move(saved));
    node->sequence_nr = next_node_sequence_nr();
    for (int p : t->graphs.joint.grad_primals) node->next_edges.push_back(gradient_edge(inputs[size_t(p)]));
    const std::vector<int>& tangent_of = t->graphs.joint.tangent_of;
    for (size_t k = 0; k < tangent_of.size(); ++k) {
      const Tensor& o = outs[size_t(tangent_of[k])];
      node->output_metas.push_back(o.meta());
      set_history(o, node, uint32_t(k));
    }
    node->pre_hooks.resize(tangent_of.size());
    // The copy-back epilogue: each mutated input receives its new value, as an eager in-place copy, so an input
    // that requires grad gets the new value's history (and a leaf that requires grad the eager error).
    for (auto [input, output] : t->graphs.mutations) {
      // The new value's history goes to an input that required grad or that an output aliases (an in-place op's
      // result); another input keeps none (batch norm's running statistics, which eager updates from detached
      // values).
      const Tensor& dst = inputs[size_t(input)];
      bool aliased = false;
      for (const AotGraphs::OutputAlias& a : t->graphs.output_aliases) aliased |= a.input == input;
      std::optional<NoGradGuard> no_grad;
      if (!dst.requires_grad() && !aliased) no_grad.emplace();
      copy_(dst, outs[size_t(output)]);
    }
    outs.resize(size_t(t->num_outputs));
    for (const AotGraphs::OutputAlias& a : t->graphs.output_aliases) {
      const Tensor& in = inputs[size_t(a.input)];
      outs[size_t(a.output)] = a.sizes == in.sizes() && a.strides == in.strides() && a.offset == 0
                                   ? in
                                   : as_strided(in, a.sizes, a.strides, in.offset() + a.offset);
    }
    return outs;
  }

  Graph graph_;
  AotConfig config_;
  CompileId compile_id_;
  Program inference_;
  std::mutex mutex_;
  std::map<std::vector<bool>, std::shared_ptr<Training>> trainings_;
};

}  // namespace

Program aot_compile(const Graph& g, AotConfig config) {
  auto f = std::make_shared<AotFunction>(g, std::move(config));
  return [f](const std::vector<Tensor>& inputs) { return (*f)(inputs); };
}

}  // namespace kiln::aot
