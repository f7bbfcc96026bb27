// The bisector's node step: the compiled program's materialised buffers (CompiledGraph::run_recording) against
// every value of the fp64 interpreter, in a forked child, then narrowed inside the guilty kernel.
#include "bisect/nodes.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "core/escape.h"
#include "core/bisect.h"
#include "core/options.h"
#include "eager/philox.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "inductor/compile.h"
#include "ops/api.h"
#include "repro/isolate.h"
#include "repro/training.h"

namespace kiln::bisect {
namespace {

std::vector<double> values_from(const Tensor& t, int64_t start, int64_t count) {
  Tensor d = contiguous(to(t, DType::F64));
  std::vector<double> out;
  const double* p = static_cast<const double*>(d.data_ptr());
  for (int64_t i = std::max<int64_t>(start, 0); i < d.numel() && int64_t(out.size()) < count; ++i) out.push_back(p[i]);
  return out;
}

// One way of recording: a name for the report and the settings it compiles under.
struct Recording {
  std::string name;
  std::vector<std::pair<Opt, std::string>> settings;
};

const Recording kRecordings[] = {
    {"kernel outputs of the program as compiled", {}},
    {"values realised inside their kernels (KILN_BISECT_DISABLE=inductor:inline,inductor:localise)",
     {{Opt::BisectDisable, "inductor:inline,inductor:localise"}}},
    {"the kernels split, one node each (KILN_BISECT_DISABLE=inductor:fusion,inductor:inline)",
     {{Opt::BisectDisable, "inductor:fusion,inductor:inline"}}},
};

// The value of `g` each materialised buffer holds (kNoValue: none): a buffer named as a value of `g` holds it; a
// buffer a decomposition made holds its composite node's output when it is the last buffer from that node's
// source line with the output's shape and dtype (the decomposition's result; earlier ones are its steps).
std::vector<graph::ValueId> values_judged(const graph::Graph& g, const std::vector<CompiledGraph::Materialised>& rec) {
  std::map<std::pair<int, int>, graph::ValueId> composite_at;  // source line:col -> the single output of its node
  for (const graph::Node& n : g.nodes())
    if (n.kind == graph::NodeKind::Op && n.loc.known() && n.outputs.size() == 1) composite_at[{n.loc.line, n.loc.col}] = n.outputs[0];
  auto fits = [&](graph::ValueId id, const Tensor& t) {
    const graph::ValueInfo& vi = g.value(id);
    return vi.producer >= 0 && vi.meta.sizes == t.sizes() && vi.meta.dtype == t.dtype();
  };
  std::vector<graph::ValueId> judged(rec.size(), graph::kNoValue);
  std::map<graph::ValueId, size_t> last_from_composite;
  for (size_t i = 0; i < rec.size(); ++i) {
    if (std::optional<graph::ValueId> id = g.find_value(rec[i].value)) {
      if (fits(*id, rec[i].tensor)) judged[i] = *id;
      continue;
    }
    auto it = composite_at.find({rec[i].loc.line, rec[i].loc.col});
    if (rec[i].loc.known() && it != composite_at.end() && fits(it->second, rec[i].tensor)) last_from_composite[it->second] = i;
  }
  for (const auto& [id, i] : last_from_composite) judged[i] = id;
  return judged;
}

bool same_recording(const std::vector<CompiledGraph::Materialised>& a, const std::vector<CompiledGraph::Materialised>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].value != b[i].value || !same_bits(a[i].tensor, b[i].tensor)) return false;
  return true;
}

// The first recorded buffer whose value of `g` diverges from its fp64 reference (an empty object: none).
nlohmann::json first_divergence(const graph::Graph& g, const std::vector<Tensor>& refs,
                                const std::vector<CompiledGraph::Materialised>& a, double tolerance) {
  nlohmann::json out = nlohmann::json::object();
  CompareOptions cmp;
  cmp.tol = tolerance;
  std::vector<graph::ValueId> judged = values_judged(g, a);
  for (size_t i = 0; i < a.size(); ++i) {
    const CompiledGraph::Materialised& m = a[i];
    if (judged[i] == graph::kNoValue || size_t(judged[i]) >= refs.size() || !refs[size_t(judged[i])].defined()) continue;
    const graph::ValueInfo& vi = g.value(judged[i]);
    const Tensor& ref = refs[size_t(judged[i])];
    CompareVerdict v = compare_outputs({to(ref, m.tensor.dtype())}, {m.tensor}, {ref}, cmp);
    if (v.ok) continue;
    const OutputVerdict& o = v.outputs[0];
    int64_t from = std::max<int64_t>(o.worst_index, 0);
    // Value names need not be UTF-8 (json's dump refuses that): lossless text, as every JSON writer.
    out["value"] = utf8_lossless(vi.name);
    out["node"] = utf8_lossless(graph::node_label(g, g.nodes()[size_t(vi.producer)]));
    out["step"] = utf8_lossless(m.step);
    out["verdict"] = utf8_lossless(v.str());
    out["worst_index"] = o.worst_index;
    out["expected"] = values_from(ref, from, 8);
    out["actual"] = values_from(m.tensor, from, 8);
    return out;
  }
  return out;
}

// In a child: compile under `rec`, run twice recording, and find the first diverging value of each run.
nlohmann::json record_and_compare(const graph::Graph& g, const std::vector<Tensor>& inputs,
                                  const std::vector<Tensor>& refs, const GeneratorState& seed, const Recording& rec,
                                  double tolerance) {
  // A narrowing setting whose site this graph never asks warns on stderr; its verdict is this child's payload.
  if (!rec.settings.empty() && std::freopen("/dev/null", "w", stderr) == nullptr) std::clearerr(stderr);
  std::vector<std::unique_ptr<ScopedOption>> applied;
  for (const auto& [opt, value] : rec.settings) applied.push_back(std::make_unique<ScopedOption>(opt, value));
  CompileOptions co;
  co.use_graph_cache = false;
  std::shared_ptr<CompiledGraph> c = compile(g, co);
  isolated_run_starts();
  auto run = [&] {
    default_generator() = seed;
    return c->run_recording(graph::copy_inputs(inputs));
  };
  std::vector<CompiledGraph::Materialised> a = run(), b = run();
  // A bug that reads memory nobody wrote (a wrong fusion) gives other values on every run: what must agree is
  // which value diverges first.
  nlohmann::json first = first_divergence(g, refs, a, tolerance), second = first_divergence(g, refs, b, tolerance);
  first["deterministic"] = first.value("value", std::string()) == second.value("value", std::string());
  first["bitwise_repeatable"] = same_recording(a, b);
  return first;
}

std::optional<Divergence> divergence_of(const nlohmann::json& j, const std::string& narrowed_by) {
  if (!j.contains("value")) return std::nullopt;
  Divergence d;
  d.value = j["value"];
  d.node = j["node"];
  d.step = j["step"];
  d.verdict = j["verdict"];
  d.worst_index = j["worst_index"];
  // JSON has no NaN or infinity: nlohmann writes them as null.
  auto numbers = [](const nlohmann::json& a) {
    std::vector<double> v;
    for (const nlohmann::json& x : a) v.push_back(x.is_number() ? x.get<double>() : std::nan(""));
    return v;
  };
  d.expected = numbers(j["expected"]);
  d.actual = numbers(j["actual"]);
  d.narrowed_by = narrowed_by;
  if (!j.value("bitwise_repeatable", true))
    d.narrowed_by += "; its values differ between two runs (memory read before it was written?), the first diverging "
                     "node does not";
  return d;
}

bool deterministic_reference(const graph::Graph& g, const std::vector<Tensor>& inputs, const GeneratorState& seed,
                             std::vector<Tensor>& refs) {
  graph::InterpretOptions fp64;
  fp64.fp64 = true;
  default_generator() = seed;
  refs = graph::run_graph_all_values(g, graph::copy_inputs(inputs), fp64);
  default_generator() = seed;
  std::vector<Tensor> again = graph::run_graph_all_values(g, graph::copy_inputs(inputs), fp64);
  for (size_t i = 0; i < refs.size(); ++i)
    if (refs[i].defined() != again[i].defined() || (refs[i].defined() && !same_bits(refs[i], again[i]))) return false;
  return true;
}

}  // namespace

std::string locate_site(const graph::Graph& g, const std::string& site_info) {
  std::string first = site_info.substr(0, site_info.find(' '));
  if (!first.empty() && first[0] == '%') first.erase(0, 1);
  std::optional<graph::ValueId> id = g.find_value(first);
  if (!id || g.value(*id).producer < 0 || !g.nodes()[size_t(g.value(*id).producer)].loc.known()) return "";
  return graph::node_label(g, g.nodes()[size_t(g.value(*id).producer)]);
}

void find_divergence(const graph::Graph& g, const std::vector<Tensor>& inputs, BisectReport& r,
                     const BisectOptions& o) {
  if ((r.stage == "aot_eager" || r.stage == "aot_eager_decomp_partition") && trains(g))
    return find_aot_divergence(g, inputs, r, o);
  if (r.stage != "inductor") {
    r.divergence_note = fmt::format("the node step reads the inductor's kernels or, in a training run, the AOT "
                                    "graphs; the failing stage is {}", r.stage);
    return;
  }
  const GeneratorState seed = default_generator();
  std::vector<Tensor> refs;
  if (!deterministic_reference(g, inputs, seed, refs)) {
    r.divergence_note = "the fp64 reference gives different values on two runs: no node can be judged";
    return;
  }
  std::optional<Divergence> kernel_level;
  for (const Recording& rec : kRecordings) {
    IsolatedResult res = run_isolated([&] { return record_and_compare(g, inputs, refs, seed, rec, o.tolerance).dump(); },
                                      o.timeout_s, setup_limit_for(o.timeout_s));
    ++r.child_runs;
    if (o.progress)
      fmt::print(stderr, "kiln bisect: [{} runs] node step, {}: {:.1f} s\n", r.child_runs, terminal_safe(rec.name),
                 res.seconds);
    if (res.kind != FailureKind::None) continue;  // this recording crashed or hung: try the next way
    nlohmann::json j = nlohmann::json::parse(res.payload);
    if (!j["deterministic"].get<bool>()) {
      if (&rec == &kRecordings[0]) {
        r.divergence_note = "two runs of the compiled program diverge first at different values: nondeterministic";
        return;
      }
      continue;
    }
    std::optional<Divergence> d = divergence_of(j, rec.name);
    if (&rec == &kRecordings[0]) {
      if (!d) {
        r.divergence_note = "no value the compiled program materialises diverges from the fp64 reference";
        if (trains(g)) r.divergence_note += " (the node step records the forward program: in a training run the "
                                            "wrong values may be the compiled backward's)";
        return;
      }
      kernel_level = d;
      if (d->step == "extern") break;  // an extern call's result: nothing to narrow
      continue;
    }
    if (d) {
      r.divergence = d;
      return;
    }
  }
  r.divergence = kernel_level;
  if (r.divergence && r.divergence->step != "extern")
    r.divergence->narrowed_by += " (narrowing inside the kernel changed the failure, so this is the kernel's output)";
}

}  // namespace kiln::bisect
