// ForkOracle: candidate inputs from recorded values, forked children (repro/isolate.h run_isolated_many), and
// the same-failure rules. A child reports "<kind>\n<message>" through a pipe; kinds: compile_error, runtime_error, accuracy, none,
// invalid (the candidate's own reference run failed).
#include "minifier/oracle.h"

#include <chrono>
#include <cstdio>

#include "graph/compare.h"
#include "graph/interpreter.h"
#include "ops/api.h"
#include "repro/reproduce.h"

namespace kiln::minify {

bool matches_target(const Target& t, const FailureSignature& o) {
  const FailureSignature& f = t.failure;
  if (o.kind != f.kind) return false;
  if (f.kind == "compile_error" || f.kind == "runtime_error") {
    if (!t.check_str.empty()) return o.message.find(t.check_str) != std::string::npos;
    return normalize_failure_message(f.message) == normalize_failure_message(o.message);
  }
  if (f.kind == "crash") return f.message == o.message;  // the signal
  return true;  // hang, accuracy
}

graph::ValueId InputSource::origin(const graph::Graph& g, graph::ValueId id) const {
  return original_.find_value(g.value(id).name).value_or(graph::kNoValue);
}

Tensor InputSource::value_of(const graph::Graph& g, graph::ValueId input) const {
  graph::ValueId o = origin(g, input);
  KILN_CHECK(o != graph::kNoValue, "minifier: input %{} names no value of the original graph", g.value(input).name);
  const auto& oin = original_.inputs();
  auto it = std::find(oin.begin(), oin.end(), o);
  NoGradGuard no_grad;
  Tensor t = it != oin.end() ? inputs_[size_t(it - oin.begin())] : values_.get(o);
  Tensor r = to(t, g.value(input).meta.dtype);
  if (r.impl() == t.impl()) r = clone(t);
  return contiguous(r).detach();
}

std::vector<Tensor> InputSource::inputs_of(const graph::Graph& g) const {
  std::vector<Tensor> out;
  for (graph::ValueId id : g.inputs()) out.push_back(value_of(g, id));
  return out;
}

Tensor InputSource::reference_of(const graph::Graph& g, graph::ValueId id) const {
  graph::ValueId o = origin(g, id);
  KILN_CHECK(o != graph::kNoValue, "minifier: %{} names no value of the original graph", g.value(id).name);
  if (g.value(id).producer < 0) {  // an input of the candidate: its reference is the value it carries
    Tensor v = value_of(g, id);
    return is_floating(v.dtype()) ? to(v, DType::F64) : v;
  }
  return values_.get(o);
}

ForkOracle::ForkOracle(const InputSource& src, ForkOracleOptions opts) : src_(src), opts_(std::move(opts)) {
  for (const graph::Node& n : src_.original().nodes())
    if (n.kind == graph::NodeKind::Op && graph::is_random_node(n)) random_graph_ = true;
  if (random_graph_) opts_.reuse_reference = false;
}

std::string ForkOracle::child_body(const graph::Graph& g, bool exact) const {
  const bool accuracy = opts_.target.failure.kind == "accuracy";
  std::vector<Tensor> inputs = src_.inputs_of(g);
  std::vector<Tensor> reference;
  if (exact) {  // the candidate's own reference must run (and is the accuracy reference)
    graph::InterpretOptions o;
    o.fp64 = true;
    std::vector<Tensor> copies;
    for (const Tensor& t : inputs) copies.push_back(clone(t).detach());
    default_generator() = opts_.seed_state;
    try {
      reference = graph::run_graph(g, copies, o);
    } catch (const std::exception& e) {
      return std::string("invalid\n") + e.what();
    }
  }
  default_generator() = opts_.seed_state;
  std::vector<Tensor> outs;
  try {
    outs = find_backend(opts_.backend)(g, inputs);
  } catch (const CompileError& e) {
    return std::string("compile_error\n") + e.what();
  } catch (const std::exception& e) {
    return std::string("runtime_error\n") + e.what();
  }
  if (!accuracy) return "none\n";
  if (!exact) {
    for (graph::ValueId id : g.outputs()) reference.push_back(src_.reference_of(g, id));
  }
  if (outs.size() != reference.size()) return fmt::format("accuracy\nthe backend returned {} outputs, the graph has {}", outs.size(), reference.size());
  std::vector<Tensor> expected;
  for (size_t i = 0; i < outs.size(); ++i) expected.push_back(to(reference[i], outs[i].dtype()));
  CompareOptions co;
  co.tol = opts_.tolerance;
  co.ignore_non_float = !opts_.target.strict_accuracy;
  CompareVerdict v = compare_outputs(expected, outs, reference, co);
  return v.ok ? std::string("none\n") : "accuracy\n" + v.str();
}

Verdict ForkOracle::judge(const IsolatedResult& r) const {
  Verdict v;
  switch (r.kind) {
    case IsolatedResult::Kind::Crash: v.observed = {"crash", r.payload}; break;
    case IsolatedResult::Kind::Hang: v.observed = {"hang", r.payload}; break;
    case IsolatedResult::Kind::Error: v.observed = {"invalid", r.payload}; break;
    case IsolatedResult::Kind::Ok: {
      size_t nl = r.payload.find('\n');
      v.observed = {r.payload.substr(0, nl), nl == std::string::npos ? "" : r.payload.substr(nl + 1)};
    }
  }
  v.fails = matches_target(opts_.target, v.observed);
  return v;
}

Verdict ForkOracle::test(const Candidate& c) {
  bool exact = !opts_.reuse_reference;
  return judge(run_isolated_many({[&] { return child_body(c.graph, exact); }}, 1, opts_.timeout_s)[0]);
}

std::vector<std::optional<Verdict>> ForkOracle::test_batch(const std::vector<const Candidate*>& batch) {
  bool exact = !opts_.reuse_reference;
  std::vector<std::function<std::string()>> bodies;
  for (const Candidate* c : batch) bodies.push_back([this, c, exact] { return child_body(c->graph, exact); });
  std::vector<IsolatedResult> rs = run_isolated_many(bodies, opts_.jobs, opts_.timeout_s);
  std::vector<std::optional<Verdict>> out;
  for (const IsolatedResult& r : rs) out.push_back(judge(r));
  return out;
}

Verdict ForkOracle::confirm(const Candidate& c) {
  return judge(run_isolated_many({[&] { return child_body(c.graph, true); }}, 1, opts_.timeout_s)[0]);
}

FailureSignature ForkOracle::classify(const graph::Graph& g) { return confirm(Candidate{g, "original"}).observed; }

}  // namespace kiln::minify
