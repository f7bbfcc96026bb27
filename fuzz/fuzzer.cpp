// The fuzzing loop of `kiln fuzz` (fuzz/fuzzer.h).
#include "fuzz/fuzzer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>

#include "core/escape.h"
#include "core/files.h"
#include "eager/philox.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "fuzz/domains.h"
#include "ops/api.h"

namespace kiln::fuzz {
namespace {

using graph::Graph;
using graph::ValueId;

// A copy of `g` with input metas and dtype arguments mapped (value names kept); shape inference re-runs.
Graph rebuild(const Graph& g, const std::function<TensorMeta(const TensorMeta&)>& input_meta,
              const std::function<DType(DType)>& dtype) {
  Graph out;
  out.name = g.name;
  std::vector<ValueId> map(size_t(g.num_values()), graph::kNoValue);
  auto m = [&](ValueId v) { return v == graph::kNoValue ? v : map.at(size_t(v)); };
  for (ValueId v : g.inputs()) map[size_t(v)] = out.add_input(g.value(v).name, input_meta(g.value(v).meta));
  for (const graph::Node& n : g.nodes()) {
    if (n.kind == graph::NodeKind::Constant) {
      Tensor c = n.constant;
      if (dtype(c.dtype()) != c.dtype()) c = to(c, dtype(c.dtype()));
      map[size_t(n.outputs[0])] = out.add_constant(g.value(n.outputs[0]).name, c);
      continue;
    }
    std::vector<graph::Arg> args = n.args;
    for (graph::Arg& a : args) {
      if (auto* t = std::get_if<graph::TensorArg>(&a)) t->id = m(t->id);
      if (auto* l = std::get_if<graph::TensorListArg>(&a))
        for (ValueId& id : l->ids) id = m(id);
      if (auto* d = std::get_if<DType>(&a)) *d = dtype(*d);
    }
    std::vector<std::string> names;
    for (ValueId v : n.outputs) names.push_back(g.value(v).name);
    std::vector<ValueId> outs = out.add_op(n.op, std::move(args), names);
    for (size_t i = 0; i < outs.size(); ++i) map[size_t(n.outputs[i])] = outs[i];
  }
  std::vector<ValueId> outs;
  for (ValueId v : g.outputs()) outs.push_back(m(v));
  out.set_outputs(outs);
  return out;
}

DType f64_if_floating(DType d) { return is_floating(d) ? DType::F64 : d; }

bool all_finite(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) {
    if (!is_floating(t.dtype()) || t.numel() == 0) continue;
    Tensor f = contiguous(to(t, DType::F64));
    const double* p = f.data<double>();
    for (int64_t i = 0; i < f.numel(); ++i)
      if (!std::isfinite(p[i])) return false;
  }
  return true;
}

std::string op_structure(const Graph& g) {
  std::string s;
  for (const graph::Node& n : g.nodes())
    if (n.kind == graph::NodeKind::Op) s += (s.empty() ? "" : ",") + std::string(n.info().name);
  return s.empty() ? "(no ops)" : s;
}

std::multiset<std::string> op_names(const Graph& g) {
  std::multiset<std::string> s;
  for (const graph::Node& n : g.nodes())
    if (n.kind == graph::NodeKind::Op) s.insert(std::string(n.info().name));
  return s;
}

// One generated graph, ready to check: its variants share the inputs' values and the reference.
struct Prepared {
  uint64_t index = 0;
  FuzzCase fc;
  std::vector<Tensor> inputs, eager, reference;
  bool valid = false, finite = false;
  bool off_steps = false;  // its discontinuous ops keep their arguments off their steps (fuzz/domains.h)
  std::string variant;
  Graph variant_graph;
  std::vector<Tensor> variant_inputs, variant_eager, variant_reference;
  std::map<std::string, std::string> variant_config;
};

// The comparator's baselines of `g` (graph/compare.h: eager at the graph's dtypes and fp64) from copies of
// `inputs`, random ops from `random_seed`.
ComparisonBaselines baselines_of(const Graph& g, const std::vector<Tensor>& inputs, uint64_t random_seed) {
  manual_seed(random_seed);
  return comparison_baselines(g, inputs);
}

// Whether the discontinuous ops of `g` keep their arguments off their steps on `inputs` (fuzz/domains.h).
bool keeps_off_steps(const Graph& g, const std::vector<Tensor>& inputs, uint64_t random_seed) {
  if (!has_steps(g)) return true;
  manual_seed(random_seed);
  graph::InterpretOptions fp64;
  fp64.fp64 = true;
  return steps_have_margin(g, graph::run_graph_all_values(g, graph::copy_inputs(inputs), fp64));
}

// The case's inputs: of at most `searches` draws (the case's own, then its floating inputs drawn again from the
// next input seeds), the first whose fp64 reference is finite and whose discontinuous ops keep off their steps;
// else the first finite one; else the last.
void choose_inputs(Prepared& p, int searches) {
  const uint64_t base = p.fc.input_seed;
  for (int s = 0; s < std::max(1, searches); ++s) {
    std::vector<Tensor> inputs = p.fc.inputs;
    for (size_t i = 0; s > 0 && i < inputs.size(); ++i) {
      const TensorMeta& m = p.fc.graph.value(p.fc.graph.inputs()[i]).meta;
      if (is_floating(m.dtype)) inputs[i] = input_value(m, (base + uint64_t(s)) * 7919 + i);
    }
    ComparisonBaselines b;
    bool off_steps = false;
    try {
      b = baselines_of(p.fc.graph, inputs, base);
      off_steps = all_finite(b.fp64) && keeps_off_steps(p.fc.graph, inputs, base);
    } catch (const Error&) {
      return;  // the reference itself fails: not a valid case
    }
    const bool finite = all_finite(b.fp64);
    if (s == 0 || (finite && !p.finite) || off_steps) {
      p.valid = true;
      p.inputs = std::move(inputs);
      p.eager = std::move(b.eager);
      p.reference = std::move(b.fp64);
      p.finite = finite;
      p.off_steps = off_steps;
    }
    if (off_steps) return;
  }
}

// Whether a node of `g` addresses a storage directly (as_strided), whose result then depends on layouts.
bool reads_storage(const Graph& g) {
  return std::any_of(g.nodes().begin(), g.nodes().end(), [](const graph::Node& n) {
    return n.kind == graph::NodeKind::Op && n.op == OpId::as_strided;
  });
}

// The metamorphic variant graph `index` is also checked in (one per graph, in turn).
void choose_variant(Prepared& p, bool metamorphic) {
  static const char* kVariants[] = {"unfused", "bisect", "contiguous", "f64"};
  if (!metamorphic) return;
  p.variant = kVariants[p.index % 4];
  p.variant_graph = p.fc.graph;
  p.variant_inputs = p.inputs;
  p.variant_eager = p.eager;
  p.variant_reference = p.reference;
  try {
    if (p.variant == "unfused") p.variant_config["KILN_BISECT_DISABLE"] = "inductor:fusion";
    if (p.variant == "bisect") p.variant_config["KILN_BISECT_LIMIT"] = fmt::format("inductor={}", (p.index / 4) % 40);
    if (p.variant == "contiguous") {
      p.variant_graph = with_contiguous_inputs(p.fc.graph);
      for (Tensor& t : p.variant_inputs) t = contiguous(t);
      // as_strided reads the storage itself, so its values depend on the inputs' layout (PyTorch's too): such a
      // graph is checked against its own expected outputs on the contiguous inputs, not the strided run's.
      if (reads_storage(p.fc.graph)) {
        ComparisonBaselines b = baselines_of(p.variant_graph, p.variant_inputs, p.fc.input_seed);
        p.variant_reference = std::move(b.fp64);
        p.variant_eager = std::move(b.eager);
      }
    }
    if (p.variant == "f64") {
      p.variant_graph = in_f64(p.fc.graph);
      // In f64 with the inputs' layouts kept: as_strided reads the layout (fuzz/findings/README.md, 11).
      for (Tensor& t : p.variant_inputs) t = graph::layout_preserving_copy(t, f64_if_floating(t.dtype()));
      // Its own reference: random ops draw at the dtype they produce, which is now f64.
      ComparisonBaselines b = baselines_of(p.variant_graph, p.variant_inputs, p.fc.input_seed);
      p.variant_reference = std::move(b.fp64);
      p.variant_eager = std::move(b.eager);
    }
  } catch (const Error&) {
    p.variant.clear();  // the graph has no such variant (an op that refuses f64, say)
  }
}

// "add_: shapes [3] and [4, 2] ... f32[]" -> "add_: shapes [..] and [..] ... DT[..]": one pattern per kind of
// refusal, whatever the shapes, dtypes and numbers.
std::string mask_numbers(const std::string& text) {
  static const std::regex list(R"(\[[^\]]*\])"), dtype(R"(\b(f16|bf16|f32|f64|i8|i16|i32|i64|u8|bool)\b)"),
      number(R"(-?[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?)");
  return std::regex_replace(std::regex_replace(std::regex_replace(text, list, "[..]"), dtype, "DT"), number, "N");
}

// A run's identity in merged summaries: 128 random bits (two workers started in the same second on two machines
// must not collide), hex.
std::string new_run_id() {
  std::random_device device;
  return fmt::format("{:08x}{:08x}{:08x}{:08x}", device(), device(), device(), device());
}

class Loop {
 public:
  explicit Loop(const FuzzOptions& o) : o_(o), start_(std::chrono::steady_clock::now()) {}

  FuzzSummary run() {
    if (!o_.out_dir.empty()) create_output_directory(o_.out_dir);
    const uint64_t round = uint64_t(std::max(1, o_.check.jobs) * batch_size(o_.check) / 2 + 1);
    uint64_t next = 0;  // this shard's graphs checked so far
    while (!done(next)) {
      uint64_t n = round;
      if (o_.runs) n = std::min(n, *o_.runs - next);
      run_round(next, n);
      next += n;
      s_.seconds = elapsed();
      if (o_.status) o_.status(s_.status_line());
    }
    s_.seconds = elapsed();
    s_.runs.push_back({new_run_id(), o_.check.backend, o_.seed, o_.first_index, s_.graphs, o_.shard, s_.seconds});
    return s_;
  }

 private:
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  bool done(uint64_t next) const {
    if (o_.runs && next >= *o_.runs) return true;
    return o_.time_s > 0 && elapsed() >= o_.time_s;
  }
  // The graph index of this shard's `k`-th graph.
  uint64_t graph_index(uint64_t k) const {
    return o_.first_index + uint64_t(o_.shard.index - 1) + k * uint64_t(o_.shard.count);
  }

  void run_round(uint64_t first, uint64_t n) {
    std::vector<Prepared> cases(n);
    std::vector<CheckJob> jobs;
    std::vector<std::pair<size_t, bool>> job_case;  // (case, is the variant)
    for (uint64_t i = 0; i < n; ++i) {
      Prepared& p = cases[i];
      p.index = graph_index(first + i);
      p.fc = generate_indexed(o_.seed, p.index, o_.gen);
      if (o_.on_graph) o_.on_graph(p.index, p.fc.graph);
      for (const CoverageKey& k : coverage_keys(p.fc.graph)) ++s_.coverage[k];
      for (const graph::Node& node : p.fc.graph.nodes())
        if (node.kind == graph::NodeKind::Op && !node.outputs.empty())
          ++s_.shape_coverage[shape_class(p.fc.graph.value(node.outputs[0]).meta.sizes)];
      for (const std::string& r : p.fc.refused) {
        FuzzSummary::Gap& gap = s_.infer_gaps[mask_numbers(r)];
        if (gap.count++ == 0) gap.first_index = p.index, gap.example = r;
      }
      ++s_.graphs;
      choose_inputs(p, o_.input_searches);
      if (!p.valid) continue;
      ++s_.valid;
      s_.nan_free += p.finite;
      // A finite case whose inputs left a discontinuous op on the edge of a step on every draw is not checked:
      // a correct compiled program may step the other way (fuzz/domains.h).
      if (p.finite && !p.off_steps) {
        ++s_.near_steps;
        continue;
      }
      choose_variant(p, o_.metamorphic);
    }
    for (size_t i = 0; i < cases.size(); ++i) {  // after the loop: `cases` no longer moves
      const Prepared& p = cases[i];
      if (!p.valid || (p.finite && !p.off_steps)) continue;
      jobs.push_back({&p.fc.graph, &p.inputs, &p.eager, &p.reference, {}, p.fc.input_seed});
      job_case.emplace_back(i, false);
      if (p.variant.empty()) continue;
      jobs.push_back({&p.variant_graph, &p.variant_inputs, &p.variant_eager, &p.variant_reference, p.variant_config,
                      p.fc.input_seed});
      job_case.emplace_back(i, true);
    }
    std::vector<FailureSignature> verdicts = check_isolated(jobs, o_.check);
    s_.checks += jobs.size();
    for (const auto& [c, variant] : job_case) ++s_.variant_coverage[variant ? cases[c].variant : "default"];
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (!verdicts[j].failed()) continue;
      const Prepared& p = cases[job_case[j].first];
      record(p, jobs[j], verdicts[j], job_case[j].second ? p.variant : "default");
      if (job_case[j].second == false && j + 1 < jobs.size() && job_case[j + 1].first == job_case[j].first) ++j;
    }
  }

  static std::multiset<std::string> ops_of_signature(const std::string& signature) {
    std::multiset<std::string> known;
    for (size_t s = signature.find(':') + 1, e; s < signature.size(); s = e + 1) {
      e = std::min(signature.find(',', s), signature.size());
      known.insert(signature.substr(s, e - s));
    }
    return known;
  }

  // A finding: counted against a bucket when one of its minimized graphs' ops all occur in the graph, with the
  // same kind and variant (so a known bug is not minified again); else minified, then counted against a bucket
  // with the same minimized signature, else bisected and put in the bucket of its root cause (a new one when
  // none has it yet).
  void record(const Prepared& p, const CheckJob& job, const FailureSignature& f, const std::string& variant) {
    const std::multiset<std::string> ops = op_names(*job.graph);
    auto contained = [&](const std::string& signature) {
      const std::multiset<std::string> known = ops_of_signature(signature);
      return std::includes(ops.begin(), ops.end(), known.begin(), known.end());
    };
    for (FindingRecord& r : s_.findings) {
      if (r.kind != f.kind) continue;
      bool known = r.variant == variant && contained(r.signature);
      for (const FindingRecord::Other& o : r.others) known = known || (o.variant == variant && contained(o.signature));
      if (known) {
        ++r.hits;
        return;
      }
    }
    FindingRecord r;
    r.kind = f.kind;
    r.message = f.message;
    r.variant = variant;
    r.seed = o_.seed;
    r.index = p.index;
    Graph reduced = *job.graph;
    MinifiedFinding m;
    if (!o_.out_dir.empty() && minified_ < o_.max_minify) {
      ++minified_;
      r.repro = (std::filesystem::path(o_.out_dir) /
                 fmt::format("{}-s{}-i{}-{}.repro", failure_kind_name(f.kind), o_.seed, p.index, variant)).string();
      m = minify_finding(job, f, o_.check, r.repro);
      reduced = m.graph;
      r.minimized = m.minimized;
      r.note = m.note;
      if (m.failure.failed()) r.message = m.failure.message;
    }
    r.signature = std::string(failure_kind_name(r.kind)) + ":" + op_structure(reduced);
    r.nodes = op_names(reduced).size();
    for (ValueId v = 0; v < reduced.num_values(); ++v) r.elements += uint64_t(std::max<int64_t>(0, shape_numel(reduced.value(v).meta.sizes)));
    auto same_graph = [&](const FindingRecord& known) {
      if (known.kind != r.kind) return false;
      if (known.signature == r.signature && known.variant == r.variant) return true;
      return std::any_of(known.others.begin(), known.others.end(), [&](const FindingRecord::Other& o) {
        return o.signature == r.signature && o.variant == r.variant;
      });
    };
    for (FindingRecord& known : s_.findings)
      if (same_graph(known)) {
        ++known.hits;
        remove_repro(r.repro);
        say(r, "the same graph as finding " + known.signature);
        return;
      }
    if (r.minimized) r.cause = bisect_finding(m.graph, m.inputs, f, job, o_.check);
    r.bucket = r.cause.explained()
                   ? fmt::format("{}|{}|{}|{}", failure_kind_name(r.kind), r.cause.stage, r.cause.site, r.cause.op)
                   : fmt::format("{}|{}|{}", r.signature, r.variant, r.cause.outcome);
    for (FindingRecord& known : s_.findings)
      if (known.bucket == r.bucket) {
        ++known.hits;
        known.others.push_back({r.index, r.variant, r.signature, r.seed});
        remove_repro(r.repro);
        say(r, "the same bug as finding " + known.signature);
        return;
      }
    say(r, "a new bug");
    s_.findings.push_back(std::move(r));
  }

  // The progress line of a minified finding: what it minimized to, its root cause, and where it went.
  void say(const FindingRecord& r, const std::string& verdict) const {
    if (!o_.progress) return;
    o_.progress(fmt::format("kiln fuzz: graph {} ({}): {}{}: {}", r.index, r.variant, r.signature,
                            r.cause.outcome.empty() ? "" : ", root cause " + r.cause.str(), verdict));
  }

  static void remove_repro(const std::string& path) {
    if (path.empty()) return;
    std::error_code ec;
    std::filesystem::remove(path, ec);
    std::filesystem::remove_all(path + ".inputs", ec);
    std::filesystem::remove(path + ".state.json", ec);
  }

  const FuzzOptions& o_;
  std::chrono::steady_clock::time_point start_;
  FuzzSummary s_;
  int minified_ = 0;
};

constexpr DType kTableDtypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64,
                                  DType::I32, DType::I16, DType::I8,   DType::U8,  DType::Bool};

}  // namespace

Graph with_contiguous_inputs(const Graph& g) {
  return rebuild(g, [](const TensorMeta& m) { return TensorMeta{m.dtype, m.sizes, contiguous_strides(m.sizes), m.device}; },
                 [](DType d) { return d; });
}

Graph in_f64(const Graph& g) {
  return rebuild(g, [](const TensorMeta& m) { return TensorMeta{f64_if_floating(m.dtype), m.sizes, m.strides, m.device}; },
                 f64_if_floating);
}

FuzzSummary run_fuzz(const FuzzOptions& opts) { return Loop(opts).run(); }

std::string shape_class(const std::vector<int64_t>& sizes) {
  return shape_numel(sizes) == 0 ? "empty" : fmt::format("rank{}", sizes.size());
}

std::string FuzzSummary::status_line() const {
  std::set<OpId> ops;
  for (const auto& [k, n] : coverage) ops.insert(k.op);
  uint64_t hits = 0;
  for (const FindingRecord& f : findings) hits += f.hits;
  auto pct = [&](uint64_t a, uint64_t b) { return b ? 100.0 * double(a) / double(b) : 100.0; };
  return fmt::format("kiln fuzz: {} graphs ({:.0f}/s) | valid {:.1f}% | NaN-free {:.1f}% | {} distinct bugs ({} hits) "
                     "| ops {}/{} | {:.0f} s",
                     graphs, seconds > 0 ? double(graphs) / seconds : 0.0, pct(valid, graphs), pct(nan_free, valid),
                     findings.size(), hits, ops.size(), all_ops().size(), seconds);
}

std::string FuzzSummary::json() const {
  nlohmann::json j;
  j["graphs"] = graphs;
  j["valid"] = valid;
  j["nan_free"] = nan_free;
  j["near_steps"] = near_steps;
  j["checks"] = checks;
  j["seconds"] = seconds;
  j["graphs_per_second"] = seconds > 0 ? double(graphs) / seconds : 0.0;
  j["valid_rate"] = graphs ? double(valid) / double(graphs) : 1.0;
  j["nan_free_rate"] = valid ? double(nan_free) / double(valid) : 1.0;
  j["distinct_bugs"] = findings.size();
  j["findings"] = nlohmann::json::array();
  for (const FindingRecord& f : findings) {
    nlohmann::json others = nlohmann::json::array();
    for (const FindingRecord::Other& o : f.others)
      others.push_back({{"index", o.index}, {"variant", o.variant}, {"signature", utf8_lossless(o.signature)},
                        {"seed", o.seed}});
    j["findings"].push_back({{"signature", utf8_lossless(f.signature)}, {"bucket", utf8_lossless(f.bucket)},
                             {"kind", failure_kind_name(f.kind)}, {"variant", f.variant}, {"seed", f.seed},
                             {"index", f.index}, {"hits", f.hits}, {"repro", utf8_lossless(f.repro)},
                             {"minimized", f.minimized}, {"message", utf8_lossless(f.message)},
                             {"note", utf8_lossless(f.note)},
                             {"root_cause", {{"outcome", utf8_lossless(f.cause.outcome)},
                                             {"stage", utf8_lossless(f.cause.stage)},
                                             {"site", utf8_lossless(f.cause.site)}, {"op", utf8_lossless(f.cause.op)}}},
                             {"other_graphs", others}, {"nodes", f.nodes}, {"elements", f.elements}});
  }
  j["runs"] = nlohmann::json::array();
  for (const RunRecord& r : runs)
    j["runs"].push_back({{"id", r.id}, {"backend", utf8_lossless(r.backend)}, {"seed", r.seed},
                         {"first_index", r.first_index}, {"shard", r.shard.str()}, {"graphs", r.graphs},
                         {"seconds", r.seconds}});
  std::set<OpId> ops;
  nlohmann::json cov = nlohmann::json::object();
  for (const auto& [k, n] : coverage) {
    ops.insert(k.op);
    cov[std::string(op_info(k.op).name)][std::string(dtype_name(k.dtype))] = n;
  }
  j["infer_gaps"] = nlohmann::json::array();
  for (const auto& [key, gap] : infer_gaps)
    j["infer_gaps"].push_back({{"pattern", key}, {"count", gap.count}, {"first_index", gap.first_index},
                               {"example", utf8_lossless(gap.example)}});
  j["coverage"] = {{"ops_reached", ops.size()}, {"ops_total", all_ops().size()}, {"nodes", cov},
                   {"shapes", shape_coverage}, {"variants", variant_coverage}};
  return j.dump(2);
}

FuzzSummary summary_from_json(const std::string& text, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    fail("{}: not JSON ({}); expected the summary.json a `kiln fuzz -o DIR` run writes", where, e.what());
  }
  FuzzSummary s;
  try {
    KILN_CHECK(j.is_object() && j.contains("runs") && j["runs"].is_array() && !j["runs"].empty(), "{}: no \"runs\" "
               "list: not the summary of this kiln's `kiln fuzz -o DIR` (run it again with this kiln)", where);
    for (const char* key : {"graphs", "valid", "nan_free", "near_steps", "checks"})
      KILN_CHECK(j.at(key).is_number_unsigned(), "{}: \"{}\" is {}; expected a count", where, key, j[key].dump());
    s.graphs = j["graphs"];
    s.valid = j["valid"];
    s.nan_free = j["nan_free"];
    s.near_steps = j["near_steps"];
    s.checks = j["checks"];
    s.seconds = j.at("seconds").get<double>();
    for (const nlohmann::json& r : j["runs"]) {
      RunRecord run{r.at("id").get<std::string>(), r.at("backend").get<std::string>(), r.at("seed").get<uint64_t>(),
                    r.at("first_index").get<uint64_t>(), r.at("graphs").get<uint64_t>(),
                    parse_shard(r.at("shard").get<std::string>(), where + ": run shard"), r.at("seconds").get<double>()};
      KILN_CHECK(!run.id.empty(), "{}: a run without an id", where);
      s.runs.push_back(std::move(run));
    }
    for (const nlohmann::json& f : j.at("findings")) {
      FindingRecord r;
      r.signature = f.at("signature").get<std::string>();
      r.bucket = f.at("bucket").get<std::string>();
      r.kind = parse_failure_kind(f.at("kind").get<std::string>(), where + ": finding kind");
      r.variant = f.at("variant").get<std::string>();
      r.seed = f.at("seed").get<uint64_t>();
      r.index = f.at("index").get<uint64_t>();
      r.hits = f.at("hits").get<uint64_t>();
      r.repro = f.at("repro").get<std::string>();
      r.minimized = f.at("minimized").get<bool>();
      r.message = f.at("message").get<std::string>();
      r.note = f.at("note").get<std::string>();
      const nlohmann::json& c = f.at("root_cause");
      r.cause = {c.at("outcome").get<std::string>(), c.at("stage").get<std::string>(), c.at("site").get<std::string>(),
                 c.at("op").get<std::string>()};
      for (const nlohmann::json& o : f.at("other_graphs"))
        r.others.push_back({o.at("index").get<uint64_t>(), o.at("variant").get<std::string>(),
                            o.at("signature").get<std::string>(), o.value("seed", r.seed)});
      r.nodes = f.value("nodes", uint64_t(0));
      r.elements = f.value("elements", uint64_t(0));
      s.findings.push_back(std::move(r));
    }
    const nlohmann::json& cov = j.at("coverage");
    for (const auto& [op, by_dtype] : cov.at("nodes").items()) {
      const OpInfo* info = find_op(op);
      KILN_CHECK(info, "{}: coverage names op {}, which this kiln does not have", where, terminal_safe(op));
      for (const auto& [dtype, n] : by_dtype.items()) {
        std::optional<DType> d = dtype_from_name(dtype);
        KILN_CHECK(d, "{}: coverage of {} names dtype {}", where, terminal_safe(op), terminal_safe(dtype));
        s.coverage[{info->id, *d}] += n.get<uint64_t>();
      }
    }
    s.shape_coverage = cov.at("shapes").get<std::map<std::string, uint64_t>>();
    s.variant_coverage = cov.at("variants").get<std::map<std::string, uint64_t>>();
    for (const nlohmann::json& g : j.at("infer_gaps"))
      s.infer_gaps[g.at("pattern").get<std::string>()] = {g.at("count").get<uint64_t>(),
                                                           g.at("first_index").get<uint64_t>(),
                                                           g.at("example").get<std::string>()};
  } catch (const nlohmann::json::exception& e) {
    fail("{}: malformed fuzz summary ({}); expected the summary.json a `kiln fuzz -o DIR` run writes", where, e.what());
  }
  return s;
}

std::string FuzzSummary::coverage_table() const {
  std::string out = fmt::format("{:<24}", "op");
  for (DType d : kTableDtypes) out += fmt::format(" {:>6}", dtype_name(d));
  out += "\n";
  int reached = 0;
  for (const OpInfo& op : all_ops()) {
    std::string row = fmt::format("{:<24}", op.name);
    bool any = false;
    for (DType d : kTableDtypes) {
      auto it = coverage.find({op.id, d});
      any |= it != coverage.end();
      row += fmt::format(" {:>6}", it == coverage.end() ? std::string(".") : std::to_string(it->second));
    }
    reached += any;
    out += row + "\n";
  }
  out += fmt::format("{} of {} ops reached (nodes counted by the dtype they compute in)\n", reached, all_ops().size());
  auto counts = [](const std::map<std::string, uint64_t>& m) {
    std::vector<std::string> parts;
    for (const auto& [k, n] : m) parts.push_back(fmt::format("{} {}", k, n));
    return parts.empty() ? std::string("none") : fmt::format("{}", fmt::join(parts, ", "));
  };
  out += "op nodes by output shape: " + counts(shape_coverage) + "\n";
  return out + "checks by variant: " + counts(variant_coverage) + "\n";
}

}  // namespace kiln::fuzz
