// The dispatcher: normalises arguments against an op's schema, runs the eager kernel (or the decomposition),
// answers shape inference for meta tensors, and hands calls that need autograd history to the installed
// AutogradHook. Every op call goes through here.
#pragma once
#include <functional>
#include <map>
#include <source_location>
#include <string_view>
#include <string>
#include <vector>

#include "ops/op_info.h"

namespace kiln {

// Binds positional and keyword arguments to the schema: checks arity and types, fills defaults, wraps
// numbers given for Tensor arguments. Throws kiln::Error naming the op and the argument.
OpCall bind_args(const OpInfo& op, std::vector<IValue> positional, const std::map<std::string, IValue>& kwargs = {});

std::vector<Tensor> dispatch(const OpCall& call);
// `where`: the user's call site, kept in OpCall::where (the Tensor API passes its caller's).
std::vector<Tensor> call_op(OpId id, std::vector<IValue> positional, std::source_location where = {});
Tensor call_op1(OpId id, std::vector<IValue> positional, std::source_location where = {});  // single-output ops
// By name (as in .kir files and the golden manifests): `call_op_named("add", {a, b}, {{"alpha", 2}})`.
std::vector<Tensor> call_op_named(std::string_view name, std::vector<IValue> positional,
                                  const std::map<std::string, IValue>& kwargs = {});

// Output metas of a call whose tensors may be meta (the registered infer function, else the decomposition
// traced on meta tensors).
std::vector<TensorMeta> infer_meta(const OpCall& call);
// Graph recording: while a recorder is installed on this thread, every call whose tensors are meta goes to it
// instead of shape inference. The inductor uses this to turn an op's decomposition (written against the Tensor
// API) into graph nodes: it runs the decomposition on meta tensors standing for graph values.
class MetaCallRecorder {
 public:
  virtual ~MetaCallRecorder() = default;
  virtual std::vector<Tensor> record(const OpCall& call) = 0;
  // `alias` stands for the same value as `of` without an op call (Tensor::detach of a meta tensor).
  virtual void alias(const Tensor& of, const Tensor& alias) = 0;
  // Whether calls without meta tensors (`zeros(sizes)`, ops on the tensors those make) are recorded too, so
  // code that makes a fresh tensor and writes into it in place (a VJP rule) is recorded whole. Off for
  // decompositions: their calls on plain tensors run eagerly and become constants.
  virtual bool records_all_calls() const { return false; }
};
// Tells the installed recorder, if any, that `alias` stands for the same value as `of`.
void record_meta_alias(const Tensor& of, const Tensor& alias);
// The autograd engine's and the runtime's own detach: a new handle on the same elements without history, made
// without an op call, so capture never records it (a saved alias, a history-free view of a compiled function's
// input, a graph constant). User code calls Tensor::detach(), the `detach` op, which capture records.
Tensor history_free_alias(const Tensor& t);
class ScopedMetaCallRecorder {
 public:
  explicit ScopedMetaCallRecorder(MetaCallRecorder* r);
  ~ScopedMetaCallRecorder();
  ScopedMetaCallRecorder(const ScopedMetaCallRecorder&) = delete;
  ScopedMetaCallRecorder& operator=(const ScopedMetaCallRecorder&) = delete;

 private:
  MetaCallRecorder* previous_;
};

// Autograd's entry points for the dispatcher. src/ops sits below src/autograd and does not include it: the
// engine (src/autograd/autograd.cpp) installs its hook during static initialisation, and CMakeLists.txt makes
// every program that links libkiln link that file (the linker is told to keep `kiln_autograd_link_anchor`).
// A call that needs history while no hook is installed is an internal error.
class AutogradHook {
 public:
  virtual ~AutogradHook() = default;
  // A differentiable op whose tensor inputs require grad ran its kernel (under no-grad): record its history.
  virtual void record_op(const OpCall& call, std::vector<Tensor>& outputs) = 0;
  // An in-place op whose tensor inputs require grad: run its kernel and record its history.
  virtual std::vector<Tensor> run_inplace_recorded(const OpCall& call) = 0;
};
// Installs `hook` for every thread (null removes it); returns the previous one.
AutogradHook* set_autograd_hook(AutogradHook* hook);

// Capture's recording hook (src/capture): while an observer is installed on this thread, every eager
// (non-meta) call runs as usual and is then reported with its outputs. The calls the op makes itself (its
// decomposition, its kernel's helpers) and their host reads (TensorReadObserver) are not reported. The
// observer may throw (fullgraph). Costs one thread-local load per call when none is installed.
enum class AutogradCallKind : uint8_t { Engine, State };
class EagerCallObserver {
 public:
  using Region = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  virtual ~EagerCallObserver() = default;
  virtual void observe(const OpCall& call, const std::vector<Tensor>& outputs) = 0;
  // An autograd engine call (`what`: "Tensor::backward()", "kiln::grad()"; kind Engine) or a read or change of a
  // tensor's autograd state ("Tensor::set_requires_grad()", "Tensor::grad()", hooks; kind State) at the user's
  // `where`: `run` on `inputs` does it. Its VJP calls must not be observed as ops of the caller's code, and the
  // state it touches belongs to each call's tensors; capture runs it as an eager region (a graph break that runs
  // it on every call).
  virtual std::vector<Tensor> autograd_call(std::string_view what, AutogradCallKind kind,
                                            const std::source_location& where, const Region& run,
                                            const std::vector<Tensor>& inputs) = 0;
};
// Installs `o` on this thread (null removes it); returns the previous observer.
EagerCallObserver* set_eager_call_observer(EagerCallObserver* o);

// Runs an autograd engine call: through this thread's observer when one is installed, else directly.
std::vector<Tensor> run_autograd_call(std::string_view what, const std::source_location& where,
                                      const EagerCallObserver::Region& run, const std::vector<Tensor>& inputs,
                                      AutogradCallKind kind = AutogradCallKind::Engine);

// Allocates contiguous outputs for `call` from its infer function (kernels use this).
std::vector<Tensor> alloc_outputs(const OpCall& call);

}  // namespace kiln
