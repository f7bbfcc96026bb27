// ForkOracle: candidate inputs from recorded values, forked children (repro/isolate.h run_isolated_many), and
// the same-failure rules. A child reports "<kind>\n<message>" through a pipe; kinds: compile_error, runtime_error, accuracy, none,
// invalid (the candidate's own reference run failed).
#include "minifier/oracle.h"

#include <chrono>
#include <cstdio>

#include "core/npy.h"
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

std::optional<std::string> ForkOracle::run_backend(const graph::Graph& g, const std::vector<Tensor>& inputs,
                                                   bool compile_only, std::vector<Tensor>& outs) const {
  default_generator() = opts_.seed_state;
  try {
    // The compile step is the child's setup: its time depends on the kernel cache, not on the candidate, so
    // only the run counts against --timeout (docs/minifier.md, Time limits).
    if (const BackendCompileFn* compile = find_backend_compiler(opts_.backend)) (*compile)(g);
    isolated_run_starts();
    if (!compile_only) outs = find_backend(opts_.backend)(g, inputs);
  } catch (const std::exception& e) {
    return encode_backend_error(e);
  }
  return std::nullopt;
}

std::string ForkOracle::original_backend_body(const std::string& outputs_dir) const {
  const graph::Graph& g = src_.original();
  std::vector<Tensor> outs;
  if (std::optional<std::string> error = run_backend(g, src_.inputs_of(g), false, outs)) return *error;
  // Outputs beyond kMaxOutputBytes stay unwritten (a probe compares them in memory instead of a disk round trip).
  constexpr int64_t kMaxOutputBytes = int64_t(64) << 20;
  int64_t bytes = 0;
  for (const Tensor& t : outs) bytes += t.numel() * int64_t(dtype_size(t.dtype()));
  if (bytes > kMaxOutputBytes) return "ran\n";
  for (size_t i = 0; i < outs.size(); ++i) write_npy(fmt::format("{}/{}.npy", outputs_dir, i), outs[i]);
  return fmt::format("ran\n{}", outs.size());
}

std::optional<Verdict> ForkOracle::judge_original_outputs(const std::string& said, const std::string& outputs_dir) const {
  const graph::Graph& g = src_.original();
  if (said.rfind("ran\n", 0) != 0 || said.size() == 4) return std::nullopt;  // no outputs written
  try {
    size_t n = std::stoul(said.substr(4));
    std::vector<Tensor> outs, reference;
    for (size_t i = 0; i < n; ++i) {
      // bf16 travels as raw '<u2' bits (npy.h): read it back as what the graph says the output is.
      std::optional<DType> as;
      if (i < g.outputs().size() && g.value(g.outputs()[i]).meta.dtype == DType::BF16) as = DType::BF16;
      outs.push_back(read_npy(fmt::format("{}/{}.npy", outputs_dir, i), as));
    }
    for (graph::ValueId id : g.outputs()) reference.push_back(src_.reference_of(g, id));
    IsolatedResult r;
    r.payload = compare_outputs_text(outs, reference);
    return judge(r);
  } catch (const std::exception&) {  // not all there (a dtype npy cannot hold, ...): the probe tells
    return std::nullopt;
  }
}

std::string ForkOracle::compare_outputs_text(const std::vector<Tensor>& outs, const std::vector<Tensor>& reference) const {
  if (outs.size() != reference.size()) return fmt::format("accuracy\nthe backend returned {} outputs, the graph has {}", outs.size(), reference.size());
  std::vector<Tensor> expected;
  for (size_t i = 0; i < outs.size(); ++i) expected.push_back(to(reference[i], outs[i].dtype()));
  CompareOptions co;
  co.tol = opts_.tolerance;
  co.ignore_non_float = !opts_.target.strict_accuracy;
  CompareVerdict v = compare_outputs(expected, outs, reference, co);
  return v.ok ? std::string("none\n") : "accuracy\n" + v.str();
}

std::string ForkOracle::child_body(const graph::Graph& g, bool exact) const {
  const bool accuracy = opts_.target.failure.kind == "accuracy";
  // For a compile_error target only the backend's compile step decides the verdict (a compiled program
  // never throws a CompileError while running, api/backends.h), so where the backend has one the candidate
  // is compiled, not run: running costs as much again and cannot change the verdict. The original's
  // classification and the final `kiln repro run` still run everything.
  const bool compile_only =
      opts_.target.failure.kind == "compile_error" && find_backend_compiler(opts_.backend) != nullptr;
  std::vector<Tensor> inputs;
  if (exact || !compile_only) inputs = src_.inputs_of(g);
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
  std::vector<Tensor> outs;
  if (std::optional<std::string> error = run_backend(g, inputs, compile_only, outs)) return *error;
  if (!accuracy) return "none\n";
  if (!exact) {
    for (graph::ValueId id : g.outputs()) reference.push_back(src_.reference_of(g, id));
  }
  return compare_outputs_text(outs, reference);
}

Verdict ForkOracle::judge(const IsolatedResult& r) const {
  Verdict v;
  switch (r.kind) {
    case IsolatedResult::Kind::Crash: v.observed = {"crash", r.payload}; break;
    case IsolatedResult::Kind::Hang: v.observed = {"hang", r.payload}; break;
    case IsolatedResult::Kind::Error:
      // child_body turns every failure of the graph into a verdict; what escapes it is the minifier's own
      // work failing (reading recorded values back, writing outputs): every verdict after it would be wrong.
      fail("a minifier child could not judge its candidate: {}", r.payload);
    case IsolatedResult::Kind::Ok: {
      v.observed = decode_failure(r.payload);
    }
  }
  v.fails = matches_target(opts_.target, v.observed);
  return v;
}

bool ForkOracle::quick_test_is_exact(const graph::Graph& g) const {
  if (!opts_.reuse_reference) return true;  // test() ran the candidate's own reference
  // Every value not computed by an op must be the same kind of value in the original: an original input
  // (not a recorded intermediate, rounded to its dtype) or an original constant (not an input made a
  // constant). Then every op computes what it computed in the recording run, from the same values: the
  // candidate's own reference runs (the recording ran) and its values are the recorded ones, bit for bit
  // (recorded on one thread, like a child's reference run; values.h).
  const graph::Graph& original = src_.original();
  for (const graph::Node& n : g.nodes()) {
    if (n.kind != graph::NodeKind::Constant) continue;
    graph::ValueId o = src_.origin(g, n.outputs[0]);
    if (o == graph::kNoValue || original.value(o).producer < 0 ||
        original.nodes()[size_t(original.value(o).producer)].kind != graph::NodeKind::Constant)
      return false;
  }
  for (graph::ValueId id : g.inputs()) {
    graph::ValueId o = src_.origin(g, id);
    if (o == graph::kNoValue || original.value(o).producer >= 0) return false;
  }
  return true;
}

std::vector<std::optional<Verdict>> ForkOracle::test_batch(const std::vector<const Candidate*>& batch) {
  bool exact = !opts_.reuse_reference;
  std::vector<std::function<std::string()>> bodies;
  for (const Candidate* c : batch) bodies.push_back([this, c, exact] { return child_body(c->graph, exact); });
  std::vector<IsolatedResult> rs = run_isolated_many(bodies, opts_.jobs, opts_.timeout_s, setup_limit_for(opts_.timeout_s));
  std::vector<std::optional<Verdict>> out;
  for (size_t i = 0; i < rs.size(); ++i) {
    Verdict v = judge(rs[i]);
    if (quick_test_is_exact(batch[i]->graph)) exact_verdicts_[candidate_key(batch[i]->graph)] = v;
    out.push_back(v);
  }
  return out;
}

Verdict ForkOracle::test(const Candidate& c) { return *test_batch({&c})[0]; }

Verdict ForkOracle::confirm(const Candidate& c) {
  auto known = exact_verdicts_.find(candidate_key(c.graph));
  if (known != exact_verdicts_.end()) return known->second;
  return judge(run_isolated({[&] { return child_body(c.graph, true); }}, opts_.timeout_s, setup_limit_for(opts_.timeout_s)));
}

FailureSignature ForkOracle::classify(const graph::Graph& g) {
  return judge(run_isolated({[&] { return child_body(g, true); }}, opts_.timeout_s, setup_limit_for(opts_.timeout_s))).observed;
}

}  // namespace kiln::minify
