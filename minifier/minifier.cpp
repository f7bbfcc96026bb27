// minify(): classify the original, record reference values, reduce with checkpoints, re-verify the written
// repro (see minifier.h).
#include "minifier/minifier.h"

#include <string.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/files.h"
#include "core/npy.h"
#include "core/options.h"
#include "graph/inputs.h"
#include "graph/text.h"
#include "minifier/hook.h"
#include "ops/api.h"
#include "repro/isolate.h"
#include "repro/reproduce.h"

namespace kiln::minify {

namespace fs = std::filesystem;

std::map<std::string, std::string> current_config() {
  std::map<std::string, std::string> out;
  for (const OptionSpec& s : option_table()) {
    // Only what a repro may set (options.h): tool settings describe how kiln was debugging, not the bug, and
    // paths and caches are never taken from a repro.
    if (!s.repro_settable()) continue;
    std::string v;
    switch (s.type) {
      case OptType::String:
      case OptType::Choice: v = opt_string(s.id); break;
      case OptType::List: v = fmt::format("{}", fmt::join(opt_list(s.id), ",")); break;
      case OptType::Int:
      case OptType::Bytes: v = std::to_string(opt_int(s.id)); break;
      case OptType::Bool: continue;
    }
    if (v != s.default_value) out[std::string(s.env)] = v;
  }
  return out;
}

uint64_t source_hash(const graph::Graph& g, const std::vector<Tensor>& inputs) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto bytes = [&](const void* p, size_t n) {
    auto* c = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 0x100000001b3ull;
  };
  std::string text = graph::print_graph(g);
  bytes(text.data(), text.size());
  for (const Tensor& t : inputs) {
    Tensor c = contiguous(t);
    bytes(c.data_ptr(), size_t(c.numel()) * dtype_size(c.dtype()));
  }
  return h;
}

void write_repro_with_inputs(const graph::Graph& g, const std::vector<Tensor>& inputs, const std::string& backend,
                             const FailureSignature& failure, const std::map<std::string, std::string>& config,
                             double tolerance, const std::string& path) {
  ReproFile r = make_repro(g);
  r.backend = backend;
  r.config = config;
  r.tolerance = tolerance;
  r.expected = failure;
  r.stage = failure.stage;
  if (g.inputs().empty()) {
    r.input_seed = 0;
  } else {
    fs::path dir = fs::path(path).string() + ".inputs";
    create_output_directory(dir.string());
    r.input_dir = dir.filename().string();
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      // A name always carries the same value within a run, so a file written once stays valid.
      std::string file = graph::input_file_name(g.value(g.inputs()[i]).name);
      const std::string target = confined_path(dir, file, "an input file of the repro").string();
      if (!fs::exists(target)) write_npy(target, inputs[i]);
      r.input_hashes[file] = content_hash_of_file(target);
    }
  }
  save_repro(r, path);
}

namespace {

// A fresh, empty directory under `parent` (empty: the system temp directory).
fs::path make_temp_dir(const std::string& parent) {
  std::string tmpl = ((parent.empty() ? fs::temp_directory_path() : fs::path(parent)) / "kiln-minify-XXXXXX").string();
  KILN_CHECK(::mkdtemp(tmpl.data()) != nullptr, "cannot create a temporary directory {}: {}", tmpl, strerror(errno));
  return tmpl;
}

std::string state_path(const std::string& output) { return output + ".state.json"; }

// Removes the .npy files in `dir` (OUT.inputs/) other than `keep`, then `dir` itself if that left it empty. Only
// what the minifier writes there goes: anything else a user keeps in a directory of that name stays.
void remove_input_files(const fs::path& dir, const std::set<std::string>& keep) {
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(dir, ec))) return;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".npy" && e.is_regular_file(ec) && !e.is_symlink(ec) &&
        !keep.count(e.path().filename().string()))
      fs::remove(e.path(), ec);
  if (fs::is_empty(dir, ec)) fs::remove(dir, ec);
}

void write_state(const MinifyOptions& o, const Target& t, const ReduceStats& s, bool done) {
  nlohmann::json j;
  j["source_hash"] = fmt::format("{:016x}", o.source_hash);
  j["backend"] = o.backend;
  j["target_kind"] = t.failure.kind;
  j["target_message"] = t.failure.message;
  j["oracle_calls"] = s.oracle_calls;
  j["cache_hits"] = s.cache_hits;
  j["accepted"] = s.accepted;
  j["seconds"] = s.seconds;
  j["start_ops"] = s.start_ops;
  j["done"] = done;
  write_file_atomic(state_path(o.output), j.dump(2) + "\n");
}

// The limits `kiln minify` checks on its flags, for callers of the library.
void check_minify_options(const MinifyOptions& o) {
  KILN_CHECK(o.jobs >= 1, "minify: jobs must be at least 1, not {}", o.jobs);
  KILN_CHECK(std::isfinite(o.timeout_s) && o.timeout_s > 0, "minify: the timeout must be a positive number of "
             "seconds, not {}", o.timeout_s);
  KILN_CHECK(std::isfinite(o.tolerance) && o.tolerance >= 0, "minify: the tolerance must be a number >= 0, not {}",
             o.tolerance);
  KILN_CHECK(o.memory_budget >= 0, "minify: the memory budget must be >= 0 bytes, not {}", o.memory_budget);
}

void print_progress(const ReduceStats& s, bool final_line) {
  std::fprintf(stderr, "\rkiln minify: %d of %d op nodes left | %d oracle calls | %.1f s | %s G=%d      %s",
               s.ops, s.start_ops, s.oracle_calls, s.seconds, s.strategy.c_str(), s.granularity,
               final_line ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace

MinifyResult minify(const graph::Graph& g, const std::vector<Tensor>& inputs, const MinifyOptions& opts_in) {
  MinifyOptions opts = opts_in;
  // The repro hook stays off in the minifier and its children: candidates must not write repros.
  bool was_in = in_minifier();
  in_minifier() = true;
  struct Restore { bool v; ~Restore() { in_minifier() = v; } } restore{was_in};
  check_minify_options(opts);
  if (opts.strict_accuracy) opts.accuracy = true;
  // One run per output: a second run naming the same OUT fails at once instead of interleaving checkpoints.
  std::optional<OutputLock> lock;
  if (!opts.output.empty()) {
    check_output_path(opts.output);
    lock.emplace(opts.output);
  }
  if (opts.source_hash == 0) opts.source_hash = source_hash(g, inputs);
  const GeneratorState seed_state = default_generator();
  ValueStore store(opts.memory_budget, opts.spill_dir);
  InputSource src(g, inputs, store);

  ForkOracleOptions fo;
  fo.backend = opts.backend;
  fo.tolerance = opts.tolerance;
  fo.timeout_s = opts.timeout_s;
  fo.jobs = opts.jobs;
  fo.seed_state = seed_state;
  // Without --accuracy the target is whatever the original shows, judged as `kiln run --check` judges it:
  // integer and bool outputs compare exactly. --accuracy alone ignores them; --strict-accuracy does not.
  fo.target.strict_accuracy = opts.strict_accuracy || !opts.accuracy;
  fo.target.check_str = opts.check_str;
  find_backend(opts.backend);  // an unknown backend is an error before any work

  MinifyResult res;
  const auto t0 = std::chrono::steady_clock::now();
  bool recorded = false;
  double resume_base = 0;
  Candidate start{g, "original"};
  ReduceStats stats;
  bool resumed = false;
  if (opts.resume) {
    KILN_CHECK(!opts.output.empty(), "--resume needs the output path of the interrupted run (-o)");
    KILN_CHECK(fs::exists(state_path(opts.output)), "cannot resume: {} does not exist (was the run started with -o "
               "{}?)", state_path(opts.output), opts.output);
    const std::string state = read_input_file(state_path(opts.output), "minifier state file");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(state);
    } catch (const nlohmann::json::exception& e) {
      fail("cannot resume: {} is not valid JSON: {}", state_path(opts.output), e.what());
    }
    try {  // a field of the wrong type (a string for a count) is malformed input, not a kiln bug
      KILN_CHECK(j.is_object(), "cannot resume: {} is not a minifier state file (not a JSON object)",
                 state_path(opts.output));
      KILN_CHECK(j.value("source_hash", "") == fmt::format("{:016x}", opts.source_hash),
                 "cannot resume: {} was made from a different graph or inputs; start a new run without --resume",
                 state_path(opts.output));
      KILN_CHECK(j.value("backend", "") == opts.backend, "cannot resume: the interrupted run used backend {}, not {}",
                 j.value("backend", ""), opts.backend);
      res.original = {j.value("target_kind", "none"), j.value("target_message", "")};
      stats.oracle_calls = j.value("oracle_calls", 0);
      stats.cache_hits = j.value("cache_hits", 0);
      stats.accepted = j.value("accepted", 0);
      stats.seconds = j.value("seconds", 0.0);
      stats.start_ops = j.value("start_ops", 0);
    } catch (const nlohmann::json::exception& e) {
      fail("cannot resume: {} is malformed ({}); start a new run without --resume", state_path(opts.output), e.what());
    }
    resume_base = stats.seconds;
    ReproFile r = load_repro(opts.output);
    for (graph::ValueId id = 0; id < r.graph.num_values(); ++id)
      KILN_CHECK(g.find_value(r.graph.value(id).name).has_value(),
                 "cannot resume: the checkpoint {} has value %{}, which the original graph does not", opts.output,
                 r.graph.value(id).name);
    start.graph = std::move(r.graph);
    start.move = "checkpoint";
    resumed = true;
  } else {
    // Before probing, the original runs once on the backend in a child. Its compile step has a generous time
    // limit (setup_limit_for: 120 s, or 10x the candidates' limit; its run has the candidates' limit). A
    // compiling backend caches its kernels on disk (shared between processes), so the candidates that follow
    // find them there (a cold 10000-node graph needs about 15 s of LLVM before it runs). The child is forked,
    // so a crash in the backend cannot end the run. It runs while this process records the reference values
    // (the two overlap on a second core), and it is forked before them, while this process is small.
    fo.target.failure = {"accuracy", ""};  // classify everything, comparing outputs when the run succeeds
    ForkOracle probe(src, fo);
    const fs::path warm_outputs = make_temp_dir(opts.spill_dir);
    struct RemoveDir { fs::path p; ~RemoveDir() { std::error_code ec; fs::remove_all(p, ec); } } remove_warm{warm_outputs};
    IsolatedResult warm = run_isolated_beside([&] { return probe.original_backend_body(warm_outputs.string()); },
                                              opts.timeout_s, [&] { record_reference(g, inputs, seed_state, store); },
                                              setup_limit_for(opts.timeout_s));
    recorded = true;
    // The warm-up run already classifies the original the way the probe would (the same run from the same
    // inputs, under the same limits; a run that ended is judged against the recorded reference exactly as
    // test() judges it) when its run was seen to end within the candidates' limit: a result read late (this
    // process was still recording) might have been a hang, and the probe tells. The recorded values are the
    // original's exact fp64 reference (and recording proved the reference runs), so the quick test
    // classifies the original exactly without a second reference run.
    std::optional<Verdict> classified;
    if (warm.kind == IsolatedResult::Kind::Hang) {
      classified = probe.judge(warm);
    } else if (warm.run_seconds <= opts.timeout_s) {
      if (warm.kind == IsolatedResult::Kind::Crash) classified = probe.judge(warm);
      if (warm.kind == IsolatedResult::Kind::Ok)
        classified = warm.payload.rfind("ran\n", 0) == 0 ? probe.judge_original_outputs(warm.payload, warm_outputs.string())
                                                          : probe.judge(warm);
    }
    res.original = classified ? classified->observed : probe.test(Candidate{g, "original"}).observed;
    const std::string& k = res.original.kind;
    KILN_CHECK(k != "invalid", "the fp64 reference run of this graph fails, so it cannot show a backend bug: {}",
               res.original.message);
    KILN_CHECK(k != "none", "the graph does not fail on backend {} (it runs and matches the fp64 reference within "
               "tolerance {}): nothing to minify", opts.backend, opts.tolerance);
    KILN_CHECK(!opts.accuracy || k == "accuracy", "--accuracy: the graph fails on backend {} with {}, not an "
               "accuracy failure: {}\n(drop --accuracy to minify that failure)", opts.backend, k, res.original.message);
    KILN_CHECK(opts.check_str.empty() || res.original.message.find(opts.check_str) != std::string::npos ||
               (k != "compile_error" && k != "runtime_error"),
               "--check-str: the graph's failure ({}) does not contain \"{}\": {}", k, opts.check_str,
               res.original.message);
    if (!opts.output.empty()) remove_input_files(opts.output + ".inputs", {});  // a fresh run: no stale input files
  }
  fo.target.failure = res.original;
  if (!recorded) record_reference(g, inputs, seed_state, store);
  ForkOracle oracle(src, fo);

  ReduceOptions ro;
  ro.max_steps = opts.max_steps;
  ro.constant_value = [&](const graph::Graph& cg, graph::ValueId id) -> std::optional<Tensor> {
    const TensorMeta& m = cg.value(id).meta;
    int64_t n = 1;
    for (int64_t s : m.sizes) n *= s;
    if (n > kConstantLimit || cg.value(id).requires_grad) return std::nullopt;
    return src.value_of(cg, id);
  };
  const bool tty = opts.progress && ::isatty(2);
  ro.on_progress = [&](const ReduceStats& s) {
    if (tty) print_progress(s, false);
  };
  ro.on_accept = [&](const Candidate& c, const ReduceStats& s) {
    if (opts.progress && !tty)
      std::fprintf(stderr, "kiln minify: %d of %d op nodes left | %d oracle calls | %.1f s | %s\n", s.ops,
                   s.start_ops, s.oracle_calls, s.seconds, c.move.c_str());
    if (opts.output.empty()) return;
    write_repro_with_inputs(c.graph, src.inputs_of(c.graph), opts.backend, res.original, opts.config,
                            opts.tolerance, opts.output);
    write_state(opts, fo.target, s, false);
  };
  if (!resumed && !opts.output.empty()) {  // the original is the first checkpoint
    stats.start_ops = std::get<0>(measure(g));
    write_repro_with_inputs(g, inputs, opts.backend, res.original, opts.config, opts.tolerance, opts.output);
    write_state(opts, fo.target, stats, false);
  }
  Candidate out = reduce(std::move(start), oracle, ro, stats);
  if (tty) print_progress(stats, true);

  res.graph = out.graph;
  res.inputs = src.inputs_of(out.graph);
  Verdict final = oracle.confirm(out);
  ++stats.oracle_calls;
  res.failure = final.observed;
  res.reverified = final.fails;
  res.reverify_message = final.fails ? "the minified graph shows the same failure"
                                     : "the minified graph no longer fails: " + final.observed.kind;
  if (!opts.output.empty() && final.fails) {
    write_repro_with_inputs(res.graph, res.inputs, opts.backend, res.failure, opts.config, opts.tolerance, opts.output);
    // The file as a user will run it: read back, inputs from disk, `kiln repro run`'s rules.
    ReproOutcome o = reproduce(load_repro(opts.output), opts.output, opts.timeout_s);
    res.reverified = o.reproduces;
    res.reverify_message = o.reproduces ? "kiln repro run: REPRODUCES"
                                        : fmt::format("kiln repro run: does not reproduce (observed {}: {})",
                                                      o.observed.kind, o.observed.message);
    // Input files of earlier checkpoints that the result no longer reads.
    std::set<std::string> keep;
    for (graph::ValueId id : res.graph.inputs()) keep.insert(graph::input_file_name(res.graph.value(id).name));
    remove_input_files(opts.output + ".inputs", keep);
  }
  stats.ops = std::get<0>(measure(res.graph));
  // Wall time of the whole run (classification, recording, reduction, re-verification), plus earlier
  // sessions' time when resumed.
  stats.seconds = resume_base + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  res.stats = stats;
  if (!opts.output.empty()) write_state(opts, fo.target, stats, opts.max_steps < 0 || stats.accepted < opts.max_steps);
  return res;
}

}  // namespace kiln::minify
