// The dispatcher: argument binding against the schema, the meta path (shape inference), the eager path
// (kernel or decomposition) and the hand-off to autograd.
#include "ops/dispatch.h"

#include <utility>

#include "core/size_math.h"
#include "ops/device_fallback.h"
#include "ops/storage_checks.h"

namespace kiln {

namespace {

std::string_view type_word(const IValue& v) {
  if (v.is_none()) return "None";
  if (v.is_tensor()) return "Tensor";
  if (v.is_tensor_list()) return "Tensor[]";
  if (v.is_scalar()) return v.scalar().is_float() ? "float" : v.scalar().is_int() ? "int" : "bool";
  if (v.is_int_list()) return "int[]";
  if (v.is_dtype()) return "dtype";
  return "str";
}

[[noreturn]] void bad_arg(const OpInfo& op, const ArgSpec& a, const IValue& v, std::string_view expected) {
  fail("{}(): argument '{}' must be {}, but got {} {} (schema: {})", op.name, a.name, expected, type_word(v), v.str(),
       op.schema.str());
}

IValue convert_arg(const OpInfo& op, const ArgSpec& a, IValue v) {
  bool none = v.is_none() || (v.is_tensor() && !v.tensor().defined());
  if (none) {
    if (a.optional) return IValue();
    bad_arg(op, a, v, "given (it is not optional)");
  }
  switch (a.type) {
    case ArgType::Tensor:
      if (v.is_tensor()) return v;
      if (v.is_scalar()) return IValue(Tensor::wrapped_number(v.scalar()));
      bad_arg(op, a, v, "a Tensor or a number");
    case ArgType::TensorList:
      if (!v.is_tensor_list()) bad_arg(op, a, v, "a list of Tensors");
      for (const Tensor& t : v.tensor_list())
        KILN_CHECK(t.defined(), "{}(): argument '{}' holds an undefined tensor", op.name, a.name);
      return v;
    case ArgType::OptTensorList:
      if (!v.is_tensor_list()) bad_arg(op, a, v, "a list of optional Tensors");
      return v;
    case ArgType::Scalar:
      if (!v.is_scalar()) bad_arg(op, a, v, "a number");
      return v;
    case ArgType::Int:
      if (!v.is_scalar() || v.scalar().is_float()) bad_arg(op, a, v, "an int");
      return IValue(v.scalar().to_int());
    case ArgType::Float:
      if (!v.is_scalar()) bad_arg(op, a, v, "a float");
      return IValue(v.scalar().to_double());
    case ArgType::Bool:
      if (!v.is_scalar() || v.scalar().is_float()) bad_arg(op, a, v, "a bool");
      return IValue(v.scalar().to_bool());
    case ArgType::IntList:
      if (v.is_int_list()) return v;
      if (v.is_scalar() && !v.scalar().is_float()) return IValue(IntList{v.scalar().to_int()});
      bad_arg(op, a, v, "a list of ints");
    case ArgType::DType:
      if (v.is_dtype()) return v;
      if (v.is_string()) {
        if (auto dt = dtype_from_name(v.string())) return IValue(*dt);
      }
      bad_arg(op, a, v, "a dtype (f32, f64, f16, bf16, i64, i32, i16, i8, u8, bool)");
    case ArgType::Str:
      if (!v.is_string()) bad_arg(op, a, v, "a string");
      return v;
  }
  return v;
}

}  // namespace

OpCall bind_args(const OpInfo& op, std::vector<IValue> positional, const std::map<std::string, IValue>& kwargs) {
  const Schema& s = op.schema;
  KILN_CHECK(positional.size() <= s.args.size(), "{}() takes at most {} arguments but {} were given (schema: {})",
             op.name, s.args.size(), positional.size(), s.str());
  OpCall call;
  call.op = &op;
  const size_t num_positional = positional.size();
  call.args = std::move(positional);
  call.args.resize(s.args.size());
  std::vector<bool> by_keyword;  // only allocated for calls with keyword arguments
  if (!kwargs.empty()) by_keyword.assign(s.args.size(), false);
  for (const auto& [name, value] : kwargs) {
    int i = s.arg_index(name);
    KILN_CHECK(i >= 0, "{}() got an unexpected argument '{}' (schema: {})", op.name, name, s.str());
    KILN_CHECK(size_t(i) >= num_positional && !by_keyword[size_t(i)], "{}() got argument '{}' twice", op.name, name);
    call.args[size_t(i)] = value;
    by_keyword[size_t(i)] = true;
  }
  for (size_t i = 0; i < s.args.size(); ++i) {
    if (i >= num_positional && (by_keyword.empty() || !by_keyword[i])) {
      KILN_CHECK(s.args[i].default_value.has_value(), "{}() is missing required argument '{}' (schema: {})", op.name,
                 s.args[i].name, s.str());
      call.args[i] = *s.args[i].default_value;
    }
    call.args[i] = convert_arg(op, s.args[i], std::move(call.args[i]));
  }
  return call;
}

// Runs f(), giving size-overflow errors from helpers that do not know the op (contiguous strides, element
// counts) the op's name.
template <class F>
auto naming_overflows(const OpInfo& op, F f) {
  try {
    return f();
  } catch (const SizeOverflowError& e) {
    fail("{}: {}", op.name, e.what());
  }
}

// A size the arguments make negative (a size list given by the caller, a geometry the inputs cannot hold) is
// refused here for every op, whatever its inference computed: no tensor has a negative size.
static void check_result_sizes(const OpInfo& op, const std::vector<TensorMeta>& metas) {
  for (size_t i = 0; i < metas.size(); ++i)
    for (int64_t s : metas[i].sizes)
      KILN_CHECK(s >= 0, "{}: the arguments give result {} the size {}, with a negative entry; check the size and "
                 "shape arguments", op.name, i, shape_str(metas[i].sizes));
}

std::vector<TensorMeta> infer_meta(const OpCall& call) {
  const OpInfo& op = *call.op;
  return naming_overflows(op, [&]() -> std::vector<TensorMeta> {
    if (op.infer) {
      std::vector<TensorMeta> metas = op.infer(call);
      check_result_sizes(op, metas);
      const Device device = results_device(call);  // results live where the operands do
      for (TensorMeta& m : metas) m.device = device;
      return metas;
    }
    if (op.decomp) {
      NoGradGuard no_grad;
      std::vector<TensorMeta> metas;
      for (const Tensor& t : op.decomp(call)) metas.push_back(t.meta());
      return metas;
    }
    fail("{}: shape inference is not available (the op has neither an infer function nor a decomposition)", op.name);
  });
}

std::vector<Tensor> alloc_outputs(const OpCall& call) {
  std::vector<Tensor> outs;
  for (const TensorMeta& m : infer_meta(call)) outs.push_back(Tensor::empty(m.sizes, m.dtype, m.device));
  return outs;
}

namespace {
// PyTorch's memory-overlap checks of an in-place call (storage_checks.h), before its kernel writes anything.
void check_inplace_call(const OpCall& call) {
  if (!inplace_checks_overlap(*call.op)) return;
  std::vector<StorageSpan> inputs;
  const std::vector<Tensor> tensors = call.flat_tensors();
  for (size_t i = 1; i < tensors.size(); ++i)
    if (tensors[i].defined() && !tensors[i].is_meta()) inputs.push_back(storage_span(tensors[i]));
  check_inplace_overlap(call.op->name, storage_span(call.tensor(0)), inputs);
}

thread_local MetaCallRecorder* t_recorder = nullptr;
thread_local EagerCallObserver* t_eager_observer = nullptr;

std::vector<Tensor> dispatch_eager(const OpCall& call);

// Runs the call with capture's hooks removed, then reports it to `observer`.
std::vector<Tensor> dispatch_observed(const OpCall& call, EagerCallObserver* observer) {
  struct Restore {
    EagerCallObserver* calls;
    TensorReadObserver* reads;
    ~Restore() { t_eager_observer = calls, set_tensor_read_observer(reads); }
  } restore{observer, set_tensor_read_observer(nullptr)};
  t_eager_observer = nullptr;
  std::vector<Tensor> outs = dispatch_eager(call);
  t_eager_observer = observer;
  set_tensor_read_observer(restore.reads);
  observer->observe(call, outs);
  return outs;
}
}  // namespace

std::vector<Tensor> run_autograd_call(std::string_view what, const std::source_location& where,
                                      const EagerCallObserver::Region& run, const std::vector<Tensor>& inputs,
                                      AutogradCallKind kind) {
  return t_eager_observer ? t_eager_observer->autograd_call(what, kind, where, run, inputs) : run(inputs);
}

EagerCallObserver* set_eager_call_observer(EagerCallObserver* o) {
  EagerCallObserver* previous = t_eager_observer;
  t_eager_observer = o;
  return previous;
}

ScopedMetaCallRecorder::ScopedMetaCallRecorder(MetaCallRecorder* r) : previous_(t_recorder) { t_recorder = r; }
ScopedMetaCallRecorder::~ScopedMetaCallRecorder() { t_recorder = previous_; }

void record_meta_alias(const Tensor& of, const Tensor& alias) {
  if (t_recorder) t_recorder->alias(of, alias);
}

Tensor history_free_alias(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->offset = t.offset();
  impl->sizes = t.sizes();
  impl->strides = t.strides();
  impl->dtype = t.dtype();
  impl->device = t.device();
  impl->wrapped_number = t.is_wrapped_number();
  // No view_base: a detached alias has no history to rewrite, and pointing back at the source would make a
  // cycle when autograd saves detached outputs (output -> grad_fn -> saved alias -> output).
  Tensor alias(std::move(impl));
  if (t.is_meta()) record_meta_alias(t, alias);  // a decomposition being recorded: the same graph value
  return alias;
}

// Defined here, not in eager/tensor.cpp: the call goes through the dispatcher (the `detach` op), so capture
// records it and a compiled function replays it on each call's values instead of baking the first call's
// result in as a constant.
Tensor Tensor::detach(std::source_location where) const { return call_op1(OpId::detach, {*this}, where); }

namespace {
AutogradHook* g_autograd_hook = nullptr;  // set once during static initialisation (src/autograd/autograd.cpp)

AutogradHook& autograd_hook() {
  KILN_ASSERT(g_autograd_hook, "an op call needs autograd history but no autograd hook is installed "
              "(src/autograd/autograd.cpp is not linked into this program)");
  return *g_autograd_hook;
}
}  // namespace

AutogradHook* set_autograd_hook(AutogradHook* hook) { return std::exchange(g_autograd_hook, hook); }

std::vector<Tensor> dispatch(const OpCall& call) {
  if (t_recorder && t_recorder->records_all_calls()) {
    MetaCallRecorder* r = t_recorder;
    ScopedMetaCallRecorder off(nullptr);
    return r->record(call);
  }
  if (call.any_meta()) {
    if (t_recorder) {
      MetaCallRecorder* r = t_recorder;
      ScopedMetaCallRecorder off(nullptr);  // the recorder's own shape inference must not record
      return r->record(call);
    }
    std::vector<Tensor> outs;
    for (const TensorMeta& m : infer_meta(call)) outs.push_back(Tensor::meta(m));
    return outs;
  }
  if (t_eager_observer) return dispatch_observed(call, t_eager_observer);
  return dispatch_eager(call);
}

namespace {
std::vector<Tensor> dispatch_eager(const OpCall& call) {
  const OpInfo& op = *call.op;
  bool needs_grad = false;
  if (grad_mode_enabled() && op.differentiable) {
    for (const Tensor& t : call.flat_tensors())
      if (t.defined() && t.requires_grad()) needs_grad = true;
  }
  if (op.is_inplace()) {
    KILN_CHECK(op.kernel, "{}: no eager kernel registered", op.name);
    check_inplace_call(call);
    if (needs_grad) return autograd_hook().run_inplace_recorded(call);
    std::vector<Tensor> outs;
    {
      NoGradGuard no_grad;
      outs = naming_overflows(op, [&] { return run_eager_kernel(call); });
    }
    call.tensor(0).storage()->bump_version();
    return outs;
  }
  if (op.kernel && (!needs_grad || op.vjp)) {
    std::vector<Tensor> outs;
    {
      NoGradGuard no_grad;
      outs = naming_overflows(op, [&] { return run_eager_kernel(call); });
    }
    if (needs_grad) autograd_hook().record_op(call, outs);
    return outs;
  }
  if (op.decomp) return op.decomp(call);  // autograd flows through the decomposition's ops
  if (op.kernel) fail("{}: cannot differentiate: the op has no VJP and no decomposition", op.name);
  fail("{}: no eager kernel is registered for this op", op.name);
}
}  // namespace

std::vector<Tensor> call_op(OpId id, std::vector<IValue> positional, std::source_location where) {
  OpCall call = bind_args(op_info(id), std::move(positional));
  call.where = where;
  return dispatch(call);
}

Tensor call_op1(OpId id, std::vector<IValue> positional, std::source_location where) {
  std::vector<Tensor> outs = call_op(id, std::move(positional), where);
  return outs.at(0);
}

std::vector<Tensor> call_op_named(std::string_view name, std::vector<IValue> positional,
                                  const std::map<std::string, IValue>& kwargs) {
  const OpInfo* op = find_op(name);
  KILN_CHECK(op, "unknown op '{}' (run `kiln ops` for the list)", name);
  return dispatch(bind_args(*op, std::move(positional), kwargs));
}

}  // namespace kiln
