// ForkOracle: candidate inputs from recorded values, forked children (repro/isolate.h run_isolated_many), and
// the failure layer's oracle and same-failure rules (repro/oracle.h, repro/failure.h). A child reports its
// encoded failure signature through a pipe (kind invalid: the candidate's own reference run failed).
#include "minifier/oracle.h"

#include <chrono>
#include <cstdio>

#include "eager/npy.h"
#include "graph/interpreter.h"
#include "ops/api.h"

namespace kiln::minify {

bool matches_target(const Target& t, const FailureSignature& o) { return same_failure(t.failure, o, t.rules()); }

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
  // A shrunk input (the shrink move) carries the leading part of the value in every dimension.
  const std::vector<int64_t>& want = g.value(input).meta.sizes;
  if (t.sizes() != want) {
    KILN_CHECK(t.dim() == int64_t(want.size()), "minifier: input %{} has rank {}, its value rank {}",
               g.value(input).name, want.size(), t.dim());
    for (size_t d = 0; d < want.size(); ++d) {
      KILN_CHECK(want[d] <= t.sizes()[d], "minifier: input %{} is larger than the value it carries",
                 g.value(input).name);
      if (want[d] < t.sizes()[d]) t = narrow(t, int64_t(d), 0, want[d]);
    }
  }
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

namespace {

OracleOptions backend_options(const ForkOracleOptions& o) {
  OracleOptions b;
  b.backend = o.backend;
  b.tolerance = o.tolerance;
  b.timeout_s = o.timeout_s;
  b.strict_accuracy = o.target.strict_accuracy;
  b.seed_state = o.seed_state;
  b.gradients = o.gradients;
  return b;
}

}  // namespace

ForkOracle::ForkOracle(const InputSource& src, ForkOracleOptions opts)
    : src_(src), opts_(std::move(opts)), backend_(backend_options(opts_)) {
  for (const graph::Node& n : src_.original().nodes())
    if (n.kind == graph::NodeKind::Op && graph::is_random_node(n)) random_graph_ = true;
  // Recorded values are of the forward run: a training run's gradients have no recorded reference.
  if (random_graph_ || opts_.gradients) opts_.reuse_reference = false;
}

std::string ForkOracle::original_backend_body(const std::string& outputs_dir) const {
  const graph::Graph& g = src_.original();
  std::vector<Tensor> outs;
  if (std::optional<FailureSignature> error = backend_.run_backend(g, src_.inputs_of(g), false, outs))
    return encode_failure(*error);
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
  if (opts_.gradients) return std::nullopt;  // the gradients have no recorded reference: the probe tells
  if (said.rfind("ran\n", 0) != 0 || said.size() == 4) return std::nullopt;  // no outputs written
  try {
    size_t n = std::stoul(said.substr(4));
    std::vector<Tensor> outs;
    ComparisonBaselines baselines;
    for (size_t i = 0; i < n; ++i) {
      // bf16 travels as raw '<u2' bits (npy.h): read it back as what the graph says the output is.
      std::optional<DType> as;
      if (i < g.outputs().size() && g.value(g.outputs()[i]).meta.dtype == DType::BF16) as = DType::BF16;
      outs.push_back(read_npy(fmt::format("{}/{}.npy", outputs_dir, i), as));
    }
    for (graph::ValueId id : g.outputs()) baselines.fp64.push_back(src_.reference_of(g, id));
    baselines.eager = backend_.eager(g, src_.inputs_of(g), baselines.fp64);
    return verdict(backend_.compare(g, outs, baselines));
  } catch (const std::exception&) {  // not all there (a dtype npy cannot hold, ...): the probe tells
    return std::nullopt;
  }
}

std::string ForkOracle::child_body(const graph::Graph& g, bool exact) const {
  const bool accuracy = opts_.target.failure.kind == FailureKind::Accuracy;
  // For a compile_error target only the backend's compile step decides the verdict (a compiled program
  // never throws a CompileError while running, api/backends.h), so where the backend has one the candidate
  // is compiled, not run: running costs as much again and cannot change the verdict. The original's
  // classification and the final `kiln repro run` still run everything.
  const bool compile_only = opts_.target.failure.kind == FailureKind::CompileError && backend_.has_compile_step();
  std::vector<Tensor> inputs;
  if (exact || !compile_only) inputs = src_.inputs_of(g);
  ComparisonBaselines baselines;
  if (exact) {  // the candidate's own reference must run (and is the accuracy reference)
    try {
      baselines = backend_.baselines(g, inputs);
    } catch (const std::exception& e) {
      return encode_failure({FailureKind::Invalid, e.what()});
    }
  }
  if (accuracy && !exact) {  // the recorded fp64 values; eager is the candidate's own run from its inputs,
    for (graph::ValueId id : g.outputs()) baselines.fp64.push_back(src_.reference_of(g, id));
    baselines.eager = backend_.eager(g, inputs, baselines.fp64);  // before the backend may write into them
  }
  std::vector<Tensor> outs;
  if (std::optional<FailureSignature> error = backend_.run_backend(g, inputs, compile_only, outs))
    return encode_failure(*error);
  if (!accuracy) return encode_failure({});
  return encode_failure(backend_.compare(g, outs, baselines));
}

Verdict ForkOracle::verdict(FailureSignature observed) const {
  Verdict v;
  v.observed = std::move(observed);
  v.fails = matches_target(opts_.target, v.observed);
  return v;
}

Verdict ForkOracle::judge(const IsolatedResult& r) const {
  // child_body turns every failure of the graph into a signature; what escapes it is the minifier's own work
  // failing (reading recorded values back, writing outputs): every verdict after it would be wrong.
  if (r.kind == FailureKind::RuntimeError) fail("a minifier child could not judge its candidate: {}", r.payload);
  return verdict(kiln::classify(r));
}

bool InputSource::recomputes_differently(const graph::Graph& g) const {
  for (graph::ValueId id = 0; id < g.num_values(); ++id) {
    graph::ValueId o = origin(g, id);
    if (o == graph::kNoValue) continue;
    const TensorMeta& a = g.value(id).meta;
    const TensorMeta& b = original_.value(o).meta;
    if (a.sizes != b.sizes || a.dtype != b.dtype) return true;
    // computed by another op than in the original (the simplify move): its recorded value is not its value
    const int p = g.value(id).producer, q = original_.value(o).producer;
    if (p >= 0 && q >= 0 && g.nodes()[size_t(p)].kind == graph::NodeKind::Op &&
        original_.nodes()[size_t(q)].kind == graph::NodeKind::Op && g.nodes()[size_t(p)].op != original_.nodes()[size_t(q)].op)
      return true;
  }
  return false;
}

bool ForkOracle::quick_test_is_exact(const graph::Graph& g) const {
  if (!opts_.reuse_reference) return true;  // test() ran the candidate's own reference
  if (src_.recomputes_differently(g)) return true;         // ... as it does for a shrunk, retyped or simplified one
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
  std::vector<std::function<std::string()>> bodies;
  for (const Candidate* c : batch) {
    // The recorded values are of the original's sizes, dtypes and ops: a candidate with others runs its own reference.
    const bool exact = !opts_.reuse_reference || src_.recomputes_differently(c->graph);
    bodies.push_back([this, c, exact] { return child_body(c->graph, exact); });
  }
  std::vector<IsolatedResult> rs = run_isolated_many(bodies, opts_.jobs, opts_.timeout_s, backend_.setup_limit_s());
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
  return judge(run_isolated([&] { return child_body(c.graph, true); }, opts_.timeout_s, backend_.setup_limit_s()));
}

FailureSignature ForkOracle::classify(const graph::Graph& g) {
  return judge(run_isolated([&] { return child_body(g, true); }, opts_.timeout_s, backend_.setup_limit_s())).observed;
}

}  // namespace kiln::minify
