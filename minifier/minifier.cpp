// minify(): classify the original, record reference values, reduce with checkpoints, re-verify the written
// repro (see minifier.h).
#include "minifier/minifier.h"

#include <string.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/escape.h"
#include "core/files.h"
#include "eager/npy.h"
#include "core/options.h"
#include "core/seed.h"
#include "graph/inputs.h"
#include "graph/text.h"
#include "minifier/hook.h"
#include "ops/api.h"
#include "repro/command.h"
#include "repro/isolate.h"
#include "repro/reproduce.h"
#include "repro/training.h"

namespace kiln::minify {

namespace fs = std::filesystem;

std::map<std::string, std::string> current_config() { return settings_in_effect(); }

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
                             double tolerance, const std::string& path, bool gradients) {
  ReproFile r = make_repro(g, backend);
  r.gradients = gradients;
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
      // Rewritten at every checkpoint: a name carries the same value within a run, but the shrink and dtype
      // moves give it smaller sizes or another dtype.
      std::string file = graph::input_file_name(g.value(g.inputs()[i]).name);
      const std::string target = confined_path(dir, file, "an input file of the repro").string();
      write_npy(target, inputs[i]);
      r.input_hashes[file] = content_hash_of_file(target);
    }
  }
  save_repro(r, path);
}

void remove_input_files(const fs::path& dir, const std::set<std::string>& keep) {
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(dir, ec))) return;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".npy" && e.is_regular_file(ec) && !e.is_symlink(ec) &&
        !keep.count(e.path().filename().string()))
      fs::remove(e.path(), ec);
  if (fs::is_empty(dir, ec)) fs::remove(dir, ec);
}

ReduceOptions shared_reduce_options(const MinifyOptions& o, const InputSource& src) {
  ReduceOptions ro;
  ro.max_steps = o.max_steps;
  ro.shape_moves = o.shape_moves;
  ro.constant_value = [&src](const graph::Graph& cg, graph::ValueId id) -> std::optional<Tensor> {
    if (shape_numel(cg.value(id).meta.sizes) > kConstantLimit || cg.value(id).requires_grad) return std::nullopt;
    return src.value_of(cg, id);
  };
  return ro;
}

namespace {

std::string state_path(const std::string& output) { return output + ".state.json"; }

// The fields of a minifier state file (OUT.state.json, written by write_state), each checked as it is read:
// present, of its type, in range. Anything else is an error naming the file and the field.
struct StateFields {
  const nlohmann::json& j;
  const std::string& path;

  const nlohmann::json& field(const char* name) const {
    auto it = j.find(name);
    KILN_CHECK(it != j.end(), "cannot resume: {} has no \"{}\" field; it is not a state file kiln minify wrote, or it "
               "was edited: start a new run without --resume", path, name);
    return *it;
  }
  [[noreturn]] void bad(const char* name, const char* expected) const {
    fail("cannot resume: {}: \"{}\" is {}, not {}; the file was edited or damaged: start a new run without --resume",
         path, name, field(name).dump(), expected);
  }
  std::string text(const char* name) const {
    const nlohmann::json& f = field(name);
    if (!f.is_string()) bad(name, "a string");
    return f.get<std::string>();
  }
  int count(const char* name) const {
    const nlohmann::json& f = field(name);
    const bool ok = f.is_number_unsigned() ? f.get<uint64_t>() <= uint64_t(INT_MAX)
                                           : f.is_number_integer() && f.get<int64_t>() >= 0 && f.get<int64_t>() <= INT_MAX;
    if (!ok) bad(name, "a count (an integer from 0 to 2147483647)");
    return f.get<int>();
  }
  double seconds(const char* name) const {
    const nlohmann::json& f = field(name);
    if (!f.is_number() || !std::isfinite(f.get<double>()) || f.get<double>() < 0) bad(name, "seconds (a number >= 0)");
    return f.get<double>();
  }
};

void write_state(const MinifyOptions& o, const Target& t, const ReduceStats& s, bool done) {
  nlohmann::json j;
  j["source_hash"] = fmt::format("{:016x}", o.source_hash);
  j["backend"] = o.backend;
  j["target_kind"] = failure_kind_name(t.failure.kind);
  j["target_message"] = utf8_lossless(t.failure.message);  // messages quote value names, which need not be UTF-8
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
  KILN_CHECK(o.reruns >= 1 && o.reruns <= 1000, "minify: --reruns must be from 1 to 1000, not {}", o.reruns);
  KILN_CHECK(o.memory_budget >= 0, "minify: the memory budget must be >= 0 bytes, not {}", o.memory_budget);
}

void print_progress(const ReduceStats& s, bool final_line) {
  std::fprintf(stderr, "\rkiln minify: %d of %d op nodes left | %d oracle calls | %.1f s | %s G=%d      %s",
               s.ops, s.start_ops, s.oracle_calls, s.seconds, s.strategy.c_str(), s.granularity,
               final_line ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace

namespace {

// One minifier run, in the named steps of minifier.h: set up, resume or warm up and classify, reduce with
// checkpoints, re-verify, finish. Each step is a method; minify() calls them in order.
class MinifyRun {
 public:
  MinifyRun(const graph::Graph& g, const std::vector<Tensor>& inputs, const MinifyOptions& opts)
      : g_(g), inputs_(inputs), opts_(opts), seed_state_(default_generator()),
        store_(opts.memory_budget, opts.spill_dir), src_(g, inputs, store_), t0_(std::chrono::steady_clock::now()) {
    fo_.backend = opts_.backend;
    fo_.tolerance = opts_.tolerance;
    fo_.timeout_s = opts_.timeout_s;
    fo_.jobs = opts_.jobs;
    fo_.seed_state = seed_state_;
    fo_.gradients = opts_.gradients;
    // Without --accuracy the target is whatever the original shows, judged as `kiln run --check` judges it:
    // integer and bool outputs compare exactly. --accuracy alone ignores them; --strict-accuracy does not.
    fo_.target.strict_accuracy = opts_.strict_accuracy || !opts_.accuracy;
    fo_.target.check_str = opts_.check_str;
  }

  MinifyResult run() {
    Candidate start = opts_.resume ? resume() : Candidate{g_, "original"};
    if (!opts_.resume) warm_up_and_classify();
    fo_.target.failure = res_.original;
    if (!recorded_) record_reference(g_, inputs_, seed_state_, store_);
    ForkOracle oracle(src_, fo_);
    if (opts_.resume) check_resume_start(start, oracle);
    else checkpoint(g_, inputs_, stats_);  // the original is the first checkpoint
    Candidate out = reduce(std::move(start), oracle, reduce_options(), stats_);
    if (progress_on_tty()) print_progress(stats_, true);
    reverify(out, oracle);
    finish();
    return res_;
  }

 private:
  bool progress_on_tty() const { return opts_.progress && ::isatty(2); }

  // The target and counters of an interrupted run, from OUT.state.json; its checkpoint is the start. Both files
  // are input: every field is checked (an edited or damaged file is an error naming it, exit 2), the
  // checkpoint's values must be the original graph's (same names, shapes and dtypes), and the checkpoint must
  // still show the recorded failure (resume_start) before the reduction trusts it.
  Candidate resume() {
    KILN_CHECK(!opts_.output.empty(), "--resume needs the output path of the interrupted run (-o)");
    const std::string path = state_path(opts_.output);
    KILN_CHECK(fs::exists(path), "cannot resume: {} does not exist (was the run started with -o {}?)", path,
               opts_.output);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_input_file(path, "minifier state file"));
    } catch (const nlohmann::json::exception& e) {
      fail("cannot resume: {} is not valid JSON: {}", path, e.what());
    }
    KILN_CHECK(j.is_object(), "cannot resume: {} is not a minifier state file (not a JSON object)", path);
    const StateFields state{j, path};
    KILN_CHECK(state.text("source_hash") == fmt::format("{:016x}", opts_.source_hash),
               "cannot resume: {} was made from a different graph or inputs; start a new run without --resume", path);
    const std::string backend = state.text("backend");
    KILN_CHECK(backend == opts_.backend, "cannot resume: the interrupted run used backend {}, not {}", backend,
               opts_.backend);
    const std::string kind = state.text("target_kind");
    FailureKind k = FailureKind::None;
    try {
      k = parse_failure_kind(kind, path);
    } catch (const Error& e) {
      fail("cannot resume: {}; the file was edited or damaged: start a new run without --resume", e.what());
    }
    KILN_CHECK(k != FailureKind::None, "cannot resume: {}: \"target_kind\" is \"none\", not a failure; the file was "
               "edited or damaged: start a new run without --resume", path);
    res_.original = {k, state.text("target_message")};
    stats_.oracle_calls = state.count("oracle_calls");
    stats_.cache_hits = state.count("cache_hits");
    stats_.accepted = state.count("accepted");
    stats_.start_ops = state.count("start_ops");
    stats_.seconds = state.seconds("seconds");
    resume_base_ = stats_.seconds;
    check_target();  // the flags of this run ask for the recorded failure (--accuracy, --check-str)
    ReproFile r = load_repro(opts_.output);
    for (graph::ValueId id = 0; id < r.graph.num_values(); ++id) {
      const graph::ValueInfo& v = r.graph.value(id);
      std::optional<graph::ValueId> o = g_.find_value(v.name);
      KILN_CHECK(o.has_value(), "cannot resume: the checkpoint {} has value %{}, which the original graph does not",
                 opts_.output, v.name);
      const TensorMeta& m = g_.value(*o).meta;
      // The shrink and dtype moves may have made it smaller, or a floating value f32; nothing else changes a value.
      bool fits = m.sizes.size() == v.meta.sizes.size() &&
                  (m.dtype == v.meta.dtype || (is_floating(m.dtype) && v.meta.dtype == DType::F32));
      for (size_t d = 0; fits && d < m.sizes.size(); ++d) fits = v.meta.sizes[d] <= m.sizes[d];
      KILN_CHECK(fits, "cannot resume: the checkpoint {} declares %{} as {}{}, but the original graph's %{} is {}{} "
                 "(a minified value can only be smaller, or f32 where it was another floating dtype); the checkpoint "
                 "was edited: start a new run without --resume", opts_.output, v.name, dtype_name(v.meta.dtype),
                 shape_str(v.meta.sizes), v.name, dtype_name(m.dtype), shape_str(m.sizes));
    }
    return Candidate{std::move(r.graph), "checkpoint"};
  }

  // A resumed run's start, confirmed: the checkpoint must still fail the way the state file says (an edited
  // checkpoint or state may not), else the reduction would end in a repro that does not reproduce.
  void check_resume_start(const Candidate& start, ForkOracle& oracle) {
    Verdict v = oracle.confirm(start);
    ++stats_.oracle_calls;
    KILN_CHECK(v.fails, "cannot resume: the checkpoint {} does not show the failure {} records ({}: {}); it shows {}: "
               "{}\nThe checkpoint or the state file was edited or damaged: start a new run without --resume",
               opts_.output, state_path(opts_.output), res_.original.kind, res_.original.message, v.observed.kind,
               v.observed.message);
  }

  // Before probing, the original runs once on the backend in a child. Its compile step has a generous time
  // limit (setup_limit_for: 120 s, or 10x the candidates' limit; its run has the candidates' limit). A
  // compiling backend caches its kernels on disk (shared between processes), so the candidates that follow
  // find them there (a cold 10000-node graph spends seconds in LLVM). The child is forked, so a crash in the
  // backend cannot end the run. It runs while this process records the reference values (the two overlap on
  // a second core), and it is forked before them, while this process is small. Then the original's failure
  // becomes the target (check_target).
  void warm_up_and_classify() {
    ForkOracleOptions everything = fo_;
    everything.target.failure = {FailureKind::Accuracy, ""};  // classify everything, comparing outputs
    ForkOracle probe(src_, everything);
    // Removed when this step ends, and when a signal ends the run (core/files.h).
    const TempDirectory warm_dir(opts_.spill_dir, "kiln-minify-");
    const fs::path& warm_outputs = warm_dir.path();
    IsolatedResult warm = run_isolated_beside([&] { return probe.original_backend_body(warm_outputs.string()); },
                                              opts_.timeout_s, [&] { record_reference(g_, inputs_, seed_state_, store_); },
                                              setup_limit_for(opts_.timeout_s));
    recorded_ = true;
    std::optional<Verdict> classified = classify_warm_up(probe, warm, warm_outputs.string());
    res_.original = classified ? classified->observed : probe.test(Candidate{g_, "original"}).observed;
    check_target();
    if (!opts_.output.empty()) remove_input_files(opts_.output + ".inputs", {});  // a fresh run: no stale files
  }

  // The warm-up run already classifies the original the way the probe would (the same run from the same
  // inputs, under the same limits; a run that ended is judged against the recorded reference exactly as
  // test() judges it) when its run was seen to end within the candidates' limit: a result read late (this
  // process was still recording) might have been a hang, and the probe tells. The recorded values are the
  // original's exact fp64 reference (and recording proved the reference runs), so the quick test classifies
  // the original exactly without a second reference run.
  std::optional<Verdict> classify_warm_up(const ForkOracle& probe, const IsolatedResult& warm,
                                          const std::string& outputs_dir) const {
    if (warm.kind == FailureKind::Hang) return probe.judge(warm);
    if (warm.run_seconds > opts_.timeout_s) return std::nullopt;
    if (warm.kind == FailureKind::Crash) return probe.judge(warm);
    if (warm.kind != FailureKind::None) return std::nullopt;
    if (warm.payload.rfind("ran\n", 0) == 0) return probe.judge_original_outputs(warm.payload, outputs_dir);
    return probe.judge(warm);
  }

  // The original must fail, in the way the flags ask for: that failure is the target.
  void check_target() const {
    const FailureSignature& f = res_.original;
    const FailureKind k = f.kind;
    KILN_CHECK(k != FailureKind::Invalid, "the fp64 reference run of this graph fails, so it cannot show a backend "
               "bug: {}", f.message);
    KILN_CHECK(k != FailureKind::None, "the graph does not fail on backend {} (it runs and matches the fp64 reference "
               "within tolerance {}): nothing to minify{}", opts_.backend, opts_.tolerance,
               !opts_.gradients && trains(g_) ? "\n(only its outputs were compared: add --grad to judge the gradients "
                                                 "of its inputs marked `grad` too)" : "");
    KILN_CHECK(!opts_.accuracy || k == FailureKind::Accuracy, "--accuracy: the graph fails on backend {} with {}, "
               "not an accuracy failure: {}\n(drop --accuracy to minify that failure)", opts_.backend, k, f.message);
    KILN_CHECK(opts_.check_str.empty() || f.message.find(opts_.check_str) != std::string::npos ||
               (k != FailureKind::CompileError && k != FailureKind::RuntimeError),
               "--check-str: the graph's failure ({}) does not contain \"{}\": {}", k, opts_.check_str, f.message);
  }

  // Writes `g` with `inputs` as the output repro and the run's state (nothing without an output).
  void checkpoint(const graph::Graph& g, const std::vector<Tensor>& inputs, ReduceStats& s) {
    if (opts_.output.empty()) return;
    if (s.start_ops == 0) s.start_ops = std::get<0>(measure(g));
    write_repro_with_inputs(g, inputs, opts_.backend, res_.original, opts_.config, opts_.tolerance, opts_.output,
                            opts_.gradients);
    write_state(opts_, fo_.target, s, false);
  }

  ReduceOptions reduce_options() {
    ReduceOptions ro = shared_reduce_options(opts_, src_);
    ro.on_progress = [this](const ReduceStats& s) {
      if (progress_on_tty()) print_progress(s, false);
    };
    ro.on_accept = [this](const Candidate& c, const ReduceStats& s) {
      if (opts_.progress && !progress_on_tty())
        std::fprintf(stderr, "kiln minify: %d of %d op nodes left | %d oracle calls | %.1f s | %s\n", s.ops,
                     s.start_ops, s.oracle_calls, s.seconds, terminal_safe(c.move).c_str());  // names values
      ReduceStats copy = s;
      checkpoint(c.graph, src_.inputs_of(c.graph), copy);
    };
    return ro;
  }

  // The result confirmed exactly, then written and read back as a user will run it (`kiln repro run`'s code).
  void reverify(const Candidate& out, ForkOracle& oracle) {
    res_.graph = out.graph;
    res_.inputs = src_.inputs_of(out.graph);
    Verdict final = oracle.confirm(out);
    ++stats_.oracle_calls;
    res_.failure = final.observed;
    res_.reverified = final.fails;
    res_.reverify_message = final.fails ? "the minified graph shows the same failure"
                                        : fmt::format("the minified graph no longer fails: {}", final.observed.kind);
    if (opts_.output.empty() || !final.fails) return;
    write_repro_with_inputs(res_.graph, res_.inputs, opts_.backend, res_.failure, opts_.config, opts_.tolerance,
                            opts_.output, opts_.gradients);
    ReproOutcome o = reproduce(load_repro(opts_.output), opts_.output, opts_.timeout_s);
    res_.reverified = o.reproduces;
    res_.reverify_message = o.reproduces ? "kiln repro run: REPRODUCES"
                                         : fmt::format("kiln repro run: does not reproduce (observed {}: {})",
                                                       o.observed.kind, o.observed.message);
    // Input files of earlier checkpoints that the result no longer reads.
    std::set<std::string> keep;
    for (graph::ValueId id : res_.graph.inputs()) keep.insert(graph::input_file_name(res_.graph.value(id).name));
    remove_input_files(opts_.output + ".inputs", keep);
  }

  // Wall time of the whole run (classification, recording, reduction, re-verification), plus earlier
  // sessions' time when resumed; the final state.
  void finish() {
    stats_.ops = std::get<0>(measure(res_.graph));
    stats_.seconds = resume_base_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    res_.stats = stats_;
    if (!opts_.output.empty())
      write_state(opts_, fo_.target, stats_, opts_.max_steps < 0 || stats_.accepted < opts_.max_steps);
  }

  const graph::Graph& g_;
  const std::vector<Tensor>& inputs_;
  const MinifyOptions& opts_;
  const GeneratorState seed_state_;
  ValueStore store_;
  InputSource src_;
  ForkOracleOptions fo_;
  MinifyResult res_;
  ReduceStats stats_;
  const std::chrono::steady_clock::time_point t0_;
  double resume_base_ = 0;
  bool recorded_ = false;
};

}  // namespace

MinifyResult minify(const graph::Graph& g, const std::vector<Tensor>& inputs, const MinifyOptions& opts_in) {
  MinifyOptions opts = opts_in;
  // The repro hook stays off in the minifier and its children: candidates must not write repros.
  bool was_in = in_minifier();
  in_minifier() = true;
  struct Restore { bool v; ~Restore() { in_minifier() = v; } } restore{was_in};
  check_minify_options(opts);
  if (!opts.command.empty() || opts.torch.enabled) return minify_with_command(g, inputs, opts);
  if (opts.strict_accuracy) opts.accuracy = true;
  // One run per output: a second run naming the same OUT fails at once instead of interleaving checkpoints.
  std::optional<OutputLock> lock;
  if (!opts.output.empty()) {
    check_output_path(opts.output);
    lock.emplace(opts.output);
  }
  if (opts.source_hash == 0) opts.source_hash = source_hash(g, inputs);
  find_backend(opts.backend);  // an unknown backend is an error before any work
  return MinifyRun(g, inputs, opts).run();
}

}  // namespace kiln::minify
