// The KILN_REPRO_AFTER / KILN_REPRO_LEVEL hook: writes repro files into KILN_DEBUG_DIR and minifies them by
// level (hook.h). All work is wrapped so nothing escapes into the caller.
#include "minifier/hook.h"

#include <cstdio>
#include <filesystem>

#include "core/escape.h"
#include "core/options.h"
#include "graph/inputs.h"
#include "inductor/compile.h"
#include "minifier/minifier.h"
#include "repro/oracle.h"
#include "ops/api.h"

namespace kiln {

namespace minify {
bool& in_minifier() {
  static bool flag = false;
  return flag;
}
}  // namespace minify

namespace {

std::string debug_dir() {
  std::string d = opt_string(Opt::DebugDir);
  return d.empty() ? "kiln_debug" : d;
}

int level() {
  try {
    return int(opt_int(Opt::ReproLevel));
  } catch (const std::exception&) {
    return 2;
  }
}

bool hook_on() {
  try {
    return !minify::in_minifier() && !opt_string(Opt::ReproAfter).empty();
  } catch (const std::exception&) {
    return false;
  }
}

std::vector<Tensor> inputs_or_seeded(const graph::Graph& g, const std::vector<Tensor>* inputs) {
  return inputs ? *inputs : graph::seeded_inputs(g, 0);
}

std::string write_and_maybe_minify(const graph::Graph& g, const std::vector<Tensor>& inputs,
                                   const FailureSignature& failure, const std::string& backend, bool minify_it) {
  std::filesystem::create_directories(debug_dir());
  std::string base = (std::filesystem::path(debug_dir()) / fmt::format("repro_{:016x}", g.structural_hash())).string();
  std::string path = base + ".repro";
  std::map<std::string, std::string> config = minify::current_config();
  minify::write_repro_with_inputs(g, inputs, backend, failure, config, 1e-4, path);
  fmt::print(stderr, "kiln: wrote repro {} ({} on backend {}); check it with: kiln repro run {}\n", path, failure.kind,
             backend, path);
  if (!minify_it) return path;
  minify::MinifyOptions o;
  o.backend = backend;
  o.accuracy = failure.kind == FailureKind::Accuracy;
  o.output = base + ".min.repro";
  o.config = config;
  minify::in_minifier() = true;
  struct Reset { ~Reset() { minify::in_minifier() = false; } } reset;
  minify::MinifyResult r = minify::minify(g, inputs, o);
  std::fprintf(stderr, "kiln: minified %d -> %d op nodes (%d oracle calls, %.1f s): %s%s\n", r.stats.start_ops,
               r.graph.num_op_nodes(), r.stats.oracle_calls, r.stats.seconds, o.output.c_str(),
               r.reverified ? "" : " (WARNING: it did not re-verify)");
  return o.output;
}

}  // namespace

bool repro_hook_wants(std::string_view stage) {
  try {
    return hook_on() && opt_string(Opt::ReproAfter) == stage;
  } catch (const std::exception&) {
    return false;
  }
}

std::string on_compile_failure(const graph::Graph& g, const std::vector<Tensor>* inputs,
                               const FailureSignature& failure, const std::string& backend) {
  if (!hook_on()) return "";
  int lv = level();
  const FailureKind k = failure.kind;
  bool wanted = (k == FailureKind::CompileError && lv >= 1) ||
                ((k == FailureKind::RuntimeError || k == FailureKind::Crash || k == FailureKind::Hang) && lv >= 3) ||
                (k == FailureKind::Accuracy && lv >= 4);
  if (!wanted) return "";
  on_compile_done(g);  // the failure's own repro replaces the pending one
  try {
    return write_and_maybe_minify(g, inputs_or_seeded(g, inputs), failure, backend, lv >= 2);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: the repro hook could not write or minify the failing graph: %s\n",
                 terminal_safe_lines(e.what()).c_str());
    return "";
  }
}

void on_compile_start(const graph::Graph& g, const std::vector<Tensor>* inputs, const std::string& backend) {
  if (!hook_on() || level() < 3) return;
  try {
    std::filesystem::create_directories(debug_dir());
    std::string path = (std::filesystem::path(debug_dir()) / fmt::format("pending_{:016x}.repro", g.structural_hash())).string();
    minify::write_repro_with_inputs(g, inputs_or_seeded(g, inputs), backend, {FailureKind::Crash, ""}, minify::current_config(),
                                    1e-4, path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: the repro hook could not save the graph before compiling: %s\n",
                 terminal_safe_lines(e.what()).c_str());
  }
}

void on_compile_done(const graph::Graph& g) {
  if (!hook_on() || level() < 3) return;
  std::error_code ec;
  std::string path = (std::filesystem::path(debug_dir()) / fmt::format("pending_{:016x}.repro", g.structural_hash())).string();
  std::filesystem::remove(path, ec);
  std::filesystem::remove_all(path + ".inputs", ec);
}

namespace {

// kiln::compile's view of the hook (src/inductor/compile.h).
class ReproCompileHook final : public CompileHook {
 public:
  bool wants(const std::string& stage) override { return repro_hook_wants(stage); }
  bool wants_accuracy() override { return hook_on() && level() >= 4; }
  void compile_started(const graph::Graph& g, const std::string& backend) override {
    on_compile_start(g, nullptr, backend);
  }
  void failed(const graph::Graph& g, const std::vector<Tensor>* inputs, const std::string& kind,
              const std::string& message, const std::string& stage, const std::string& backend) override {
    try {  // kiln::compile names the kind as text (src/inductor/compile.h sits below the failure layer)
      on_compile_failure(g, inputs, FailureSignature{parse_failure_kind(kind, "CompileHook::failed"), message, stage},
                         backend);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kiln: the repro hook could not write the failing graph: %s\n",
                   terminal_safe_lines(e.what()).c_str());
    }
  }
  void first_run_succeeded(const graph::Graph& g) override { on_compile_done(g); }
  void check_accuracy(const graph::Graph& g, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                      const std::string& backend) override {
    check_accuracy_after_compile(g, inputs, outputs, backend);
  }
};

}  // namespace

void install_repro_hook() {
  static ReproCompileHook hook;
  set_compile_hook(&hook);
}

FailureSignature check_accuracy_after_compile(const graph::Graph& g, const std::vector<Tensor>& inputs,
                                              const std::vector<Tensor>& outputs, const std::string& backend) {
  if (!hook_on() || level() < 4) return {};
  try {
    // The failure layer's judgement (repro/oracle.h), in this process: the run already happened.
    OracleOptions o;
    o.backend = backend;
    o.strict_accuracy = false;  // --accuracy's rule: non-float outputs are not compared
    const FailureOracle oracle(o);
    FailureSignature f = oracle.compare(g, outputs, oracle.baselines(g, inputs));
    if (!f.failed()) return {};
    write_and_maybe_minify(g, inputs, f, backend, true);
    return f;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: the accuracy hook failed: %s\n",
                 terminal_safe_lines(e.what()).c_str());
    return {};
  }
}

}  // namespace kiln
