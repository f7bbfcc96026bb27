// The recorder: while a compiled function is traced, it observes every eager dispatcher call (the
// EagerCallObserver hook) and every host read of a tensor (the TensorReadObserver hook) on this thread, and
// builds the Trace: ops go into the open graph segment, reads close it (a graph break), and kiln::disable /
// kiln::print regions and ops a graph cannot hold become eager regions.
#pragma once
#include <unordered_map>

#include "capture/pytree.h"
#include "capture/trace.h"
#include "ops/dispatch.h"

namespace kiln::capture {

struct RecordOptions {
  bool fullgraph = false;
  std::string function;  // "fn (file:line)", for fullgraph errors
  // The backend compiles graphs with autograd (AOT autograd: backend_supports_autograd), so ops whose inputs
  // require grad go into graphs instead of breaking.
  bool differentiable_graphs = false;
};

class Recorder final : public EagerCallObserver, public TensorReadObserver {
 public:
  // Installs the hooks on this thread; `args` are the call's flattened arguments, `leaf_names` their names.
  Recorder(const Flat& args, const std::vector<std::string>& leaf_names, RecordOptions options);
  ~Recorder() override;
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // The recorder tracing on this thread, or null.
  static Recorder* current();
  // Ends the trace with the function's flattened result.
  Trace finish(const Flat& result);
  // Runs `run` eagerly (hooks off) as an eager region and records it; returns its outputs.
  std::vector<Tensor> eager_region(BreakKind kind, std::string reason, SourceSite site,
                                   std::function<std::vector<Tensor>(const std::vector<Tensor>&)> run,
                                   const std::vector<Tensor>& inputs);

  void observe(const OpCall& call, const std::vector<Tensor>& outputs) override;
  // Tensor::backward(), kiln::grad() and autograd state calls inside the function: an eager region (break kind
  // `autograd`).
  std::vector<Tensor> autograd_call(std::string_view what, AutogradCallKind kind, const std::source_location& where,
                                    const Region& run, const std::vector<Tensor>& inputs) override;
  void read(const Tensor& t, TensorRead kind, const std::source_location& where) override;

 private:
  struct Known {
    std::weak_ptr<TensorImpl> impl;
    int value;
  };
  int value_of(const Tensor& t);
  int new_value(ValueSource source, const std::string& name, const TensorMeta& meta);
  void bind(const Tensor& t, int value);
  graph::ValueId graph_value(const Tensor& t);
  graph::Arg graph_arg(const IValue& v);
  std::string unsupported_reason(const OpCall& call);
  void record_unsupported(const OpCall& call, const std::vector<Tensor>& outputs, const std::string& reason);
  void close_segment(const std::vector<int>* final_outputs = nullptr);
  void check_fullgraph(std::string_view reason, const SourceSite& site);

  RecordOptions options_;
  Trace trace_;
  std::unordered_map<const TensorImpl*, Known> known_;
  std::vector<std::pair<int, Tensor>> held_;  // tensors read from elsewhere, until finish() tells captured from constant
  Segment open_;
  std::unordered_map<int, graph::ValueId> in_open_;  // trace value -> value of the open segment's graph
  std::vector<int> defined_in_open_;
  bool keep_input_values_ = false;  // KILN_DEBUG_DIR is set: segments keep their inputs' values to dump
  EagerCallObserver* previous_calls_;
  TensorReadObserver* previous_reads_;
};

// Hooks off on this thread for a scope (an eager region's body, a replayed region).
class ScopedNoRecording {
 public:
  ScopedNoRecording();
  ~ScopedNoRecording();
  ScopedNoRecording(const ScopedNoRecording&) = delete;
  ScopedNoRecording& operator=(const ScopedNoRecording&) = delete;

 private:
  EagerCallObserver* calls_;
  TensorReadObserver* reads_;
};

}  // namespace kiln::capture
