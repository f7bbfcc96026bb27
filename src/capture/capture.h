// Capture: kiln::compile(fn) for C++ functions over kiln tensors (the TorchDynamo analog, docs/capture.md).
//
//   auto f = kiln::compile([&](const Tensor& x, int64_t n) { ... }, {.backend = "inductor"});
//   Tensor y = f(x, 3);                      // first call: traced (runs eagerly); later: compiled graphs
//   std::cout << kiln::explain(fn, x, 3);    // graphs, breaks with reasons and lines, guards
//
// The first call with a new guard set runs fn eagerly while recording every dispatcher call; host reads of a
// tensor (item(), is_nonzero(), to_double_vector()), kiln::disable and kiln::print regions and ops a graph
// cannot hold break the graph. Later calls check the guards and replay: compiled graphs, eager regions, and
// the branch their break values select. A cached call does not run fn: side effects must go through
// kiln::disable (runs every call) or kiln::print (printed every call).
#pragma once
#include <functional>
#include <source_location>
#include <string>
#include <type_traits>

#include "capture/compiled_function.h"
#include "capture/explain.h"
#include "capture/recorder.h"
#include "core/trace.h"  // kiln::compile_times(), CompileProfiler
#include "graph/graph.h"

namespace kiln {

namespace capture {

// The signature of a callable with one call operator (lambdas, function objects) or a function pointer.
template <class T>
struct Signature : Signature<decltype(&T::operator())> {};
template <class R, class... A>
struct Signature<R (*)(A...)> {
  using type = R(A...);
};
template <class R, class... A>
struct Signature<R(A...)> {
  using type = R(A...);
};
template <class C, class R, class... A>
struct Signature<R (C::*)(A...) const> {
  using type = R(A...);
};
template <class C, class R, class... A>
struct Signature<R (C::*)(A...)> {
  using type = R(A...);
};

// One argument of a compiled call with the caller's line (taken where the argument converts, so nothing is
// asked of the user).
template <class T>
struct CallArg {
  T value;
  std::source_location where;
  CallArg(T v, std::source_location w = std::source_location::current())  // NOLINT: implicit by design
      : value(std::forward<T>(v)), where(w) {}
};

}  // namespace capture

template <class Sig>
class Compiled;

// A compiled function: call it like the function it wraps. Copies share one cache. Thread-safe.
template <class R, class... A>
class Compiled<R(A...)> {
 public:
  Compiled(std::function<R(A...)> fn, CaptureOptions options, capture::SourceSite compiled_at)
      : fn_(std::make_shared<std::function<R(A...)>>(std::move(fn))),
        arg_names_(options.arg_names),
        core_(std::make_shared<capture::CompiledFunction>(std::move(options), std::move(compiled_at))) {}

  R operator()(capture::CallArg<A>... args)
    requires(sizeof...(A) > 0)
  {
    std::source_location where = std::get<0>(std::tie(args...)).where;
    return invoke(where, args.value...);
  }
  R operator()(std::source_location where = std::source_location::current())
    requires(sizeof...(A) == 0)
  {
    return invoke(where);
  }

  capture::CompiledFunction& core() const { return *core_; }

 private:
  template <class... V>
  R invoke(const std::source_location& where, V&... values) {
    capture::Flat flat;
    (capture::flatten_into(flat, values, std::string()), ...);
    auto names_of = [&](capture::Flat& named) {
      size_t i = 0;
      (capture::flatten_into(named, values, arg_name(i++)), ...);
    };
    capture::EagerRun run = [&]() {
      capture::Flat out;
      if constexpr (std::is_void_v<R>) (*fn_)(values...);
      else capture::flatten_into(out, (*fn_)(values...), "result");
      return out;
    };
    capture::Flat out = core_->call(flat, names_of, run, capture::SourceSite::from(where));
    if constexpr (!std::is_void_v<R>) return capture::unflatten_as<std::decay_t<R>>(out);
  }
  std::string arg_name(size_t i) const { return i < arg_names_.size() ? arg_names_[i] : "arg" + std::to_string(i); }

  std::shared_ptr<std::function<R(A...)>> fn_;
  std::vector<std::string> arg_names_;
  std::shared_ptr<capture::CompiledFunction> core_;
};

// Compiles a callable over tensors, numbers, bools and (nested) std::vector / std::tuple / std::pair of them.
// (A graph::Graph goes to the inductor's kiln::compile in inductor/compile.h.)
template <class F>
  requires(!std::is_convertible_v<const F&, const graph::Graph&>)
auto compile(F fn, CaptureOptions options = {}, std::source_location where = std::source_location::current()) {
  using Sig = typename capture::Signature<std::decay_t<F>>::type;
  return Compiled<Sig>(std::function<Sig>(std::move(fn)), std::move(options), capture::SourceSite::from(where));
}

// Runs `fn` eagerly on every call of a compiled function (a graph break): for side effects and code capture
// must not trace. Its inputs and outputs are tensors; the callable is kept and called on later calls, so it
// must not capture references to the traced function's locals. Outside a compiled function it just runs.
std::vector<Tensor> disable(std::function<std::vector<Tensor>(const std::vector<Tensor>&)> fn,
                            const std::vector<Tensor>& inputs,
                            std::source_location where = std::source_location::current());
void disable(std::function<void()> fn, std::source_location where = std::source_location::current());
// Prints a line (or "label: tensor") to stdout on every call of a compiled function (a graph break).
void print(const std::string& text, std::source_location where = std::source_location::current());
void print(const std::string& label, const Tensor& t, std::source_location where = std::source_location::current());

// Traces `fn` once on `args` (running it eagerly) and reports its graphs, breaks and guards.
template <class F, class... V>
ExplainOutput explain(F&& fn, const V&... args) {
  capture::Flat flat;
  std::vector<std::string> leaf_names, length_names;
  flat.leaf_names = &leaf_names;
  flat.length_names = &length_names;
  size_t i = 0;
  (capture::flatten_into(flat, args, "arg" + std::to_string(i++)), ...);
  capture::Trace trace;
  {
    capture::Recorder recorder(flat, leaf_names, capture::RecordOptions{false, "explained function"});
    capture::Flat out;
    using R = decltype(fn(args...));
    if constexpr (std::is_void_v<R>) fn(args...);
    else capture::flatten_into(out, fn(args...), "result");
    trace = recorder.finish(out);
  }
  return capture::explain_trace(
      trace, capture::GuardSet::of_call(flat, leaf_names, length_names, capture::resolve_backend_name("", false)));
}

}  // namespace kiln
