// The KILN_REPRO_AFTER / KILN_REPRO_LEVEL hook: writes repro files into KILN_DEBUG_DIR and minifies them by
// level (hook.h). All work is wrapped so nothing escapes into the caller.
#include "minifier/hook.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/escape.h"
#include "core/hash.h"
#include "core/options.h"
#include "graph/inputs.h"
#include "inductor/compile.h"
#include "minifier/minifier.h"
#include "repro/command.h"
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

// A repro's name: the graph's hash and the failure's (backend, kind, message modulo names and numbers), so two
// failures of one graph (a compile error on one backend, a crash on another) are two files, and the same
// failure seen again is the same file.
std::string repro_base(const graph::Graph& g, const FailureSignature& failure, const std::string& backend) {
  const std::string what = fmt::format("{}\n{}\n{}", backend, failure_kind_name(failure.kind),
                                       normalize_failure_message(failure.message));
  return (std::filesystem::path(debug_dir()) /
          fmt::format("repro_{:016x}_{}", g.structural_hash(), sha256_hex(what).substr(0, 8))).string();
}

// The repro saved before a compile (level 3+), named by the graph and this process: a crash leaves it behind.
std::string pending_path(const graph::Graph& g) {
  return (std::filesystem::path(debug_dir()) / fmt::format("pending_{:016x}_{}.repro", g.structural_hash(), ::getpid()))
      .string();
}

std::string check_line(const std::string& repro) { return reproduce_command(RunLine{.file = repro, .repro_run = true}); }

std::string write_and_maybe_minify(const graph::Graph& g, const std::vector<Tensor>& inputs,
                                   const FailureSignature& failure, const std::string& backend, bool minify_it) {
  std::filesystem::create_directories(debug_dir());
  std::string base = repro_base(g, failure, backend);
  std::string path = base + ".repro";
  std::map<std::string, std::string> config = minify::current_config();
  minify::write_repro_with_inputs(g, inputs, backend, failure, config, 1e-4, path);
  fmt::print(stderr, "kiln: wrote repro {} ({} on backend {}); check it with: {}\n", terminal_safe(path), failure.kind,
             backend, check_line(path));
  if (!minify_it) return path;
  minify::MinifyOptions o;
  o.backend = backend;
  o.accuracy = failure.kind == FailureKind::Accuracy;
  o.output = base + ".min.repro";
  o.config = config;
  minify::in_minifier() = true;
  struct Reset { ~Reset() { minify::in_minifier() = false; } } reset;
  minify::MinifyResult r = minify::minify(g, inputs, o);
  std::fprintf(stderr, "kiln: minified %d -> %d op nodes (%d oracle calls, %.1f s): %s%s; check it with: %s\n",
               r.stats.start_ops, r.graph.num_op_nodes(), r.stats.oracle_calls, r.stats.seconds,
               terminal_safe(o.output).c_str(), r.reverified ? "" : " (WARNING: it did not re-verify)",
               check_line(o.output).c_str());
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
    std::string path = pending_path(g);
    minify::write_repro_with_inputs(g, inputs_or_seeded(g, inputs), backend, {FailureKind::Crash, ""}, minify::current_config(),
                                    1e-4, path);
    // What the crash report says if this compile or the program's first run dies by a signal.
    set_crash_note(fmt::format("while compiling or first running graph {} on backend {}; the graph was saved before "
                               "compiling as {}: check it with: {}", terminal_safe(g.name), backend, terminal_safe(path),
                               check_line(path)));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: the repro hook could not save the graph before compiling: %s\n",
                 terminal_safe_lines(e.what()).c_str());
  }
}

void on_compile_done(const graph::Graph& g) {
  if (!hook_on() || level() < 3) return;
  std::error_code ec;
  std::string path = pending_path(g);
  set_crash_note("");
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

// ---- the crash report ----

namespace {

// The note the handler prints, written only outside the handler (a compile start or end) and read only by it:
// a fixed buffer, published by the flag, so the handler needs no allocation or lock.
char g_crash_note[4096];
std::atomic<bool> g_crash_note_set{false};
pid_t g_crash_report_pid = 0;  // the process that installed the report (forked children reset the handlers)
constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
struct sigaction g_previous[5];  // what each signal did before (a sanitizer's handler, or the default)

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    default: return "a signal";
  }
}

void write_str(const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    ssize_t w = ::write(2, s, n);
    if (w <= 0) return;
    s += w, n -= size_t(w);
  }
}

// Async-signal-safe: write(2), strlen and the integer formatting below only; then the previous action (the
// default, or a sanitizer's report), so the process still dies by the signal (the shell shows 128 + N: 139 for
// SIGSEGV; docs/cli.md, Exit status).
void crash_handler(int sig) {
  if (::getpid() == g_crash_report_pid) {
    char number[8] = {};
    int v = sig, i = 6;
    do number[i--] = char('0' + v % 10), v /= 10; while (v > 0 && i >= 0);
    write_str("\nkiln: crashed: ");
    write_str(signal_name(sig));
    write_str(" (signal ");
    write_str(number + i + 1);
    write_str(")");
    if (g_crash_note_set.load()) {
      write_str(" ");
      write_str(g_crash_note);
    } else {
      write_str("; to save the graph that crashes as a repro file, run the command again with "
                "KILN_REPRO_AFTER=backend KILN_REPRO_LEVEL=3");
    }
    write_str("\n");
  }
  for (size_t i = 0; i < std::size(kCrashSignals); ++i)
    if (kCrashSignals[i] == sig) ::sigaction(sig, &g_previous[i], nullptr);
  ::raise(sig);
}

}  // namespace

void set_crash_note(const std::string& note) {
  g_crash_note_set.store(false);
  std::snprintf(g_crash_note, sizeof g_crash_note, "%s", note.c_str());
  g_crash_note_set.store(!note.empty());
}

void install_crash_report() {
  g_crash_report_pid = ::getpid();
  struct sigaction sa {};
  sa.sa_handler = crash_handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_NODEFER;
  for (size_t i = 0; i < std::size(kCrashSignals); ++i) ::sigaction(kCrashSignals[i], &sa, &g_previous[i]);
}

}  // namespace kiln
