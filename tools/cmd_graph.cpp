// `kiln verify`, `kiln fmt` and `kiln run`: check, canonicalise and execute .kir graphs (`run` also a repro file's
// graph, with its inputs and configuration). Errors in the file or its inputs are kiln::Errors (kiln.cpp prints
// them and exits 2); `run --check` exits 1 when the outputs disagree with the fp64 reference (within --tol).
#include "tools/cmd_graph.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "api/backends.h"
#include "core/escape.h"
#include "core/files.h"
#include "eager/npy.h"
#include "core/options.h"
#include "core/seed.h"
#include "eager/philox.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "graph/verify.h"
#include "inductor/compile_options.h"
#include "minifier/emit.h"
#include "ops/api.h"
#include "repro/graph_source.h"
#include "repro/training.h"
#include "tools/cli_checks.h"

namespace kiln::cli {
namespace {

struct RunArgs {
  std::string file;
  std::optional<std::string> backend;  // unset: a repro file's, else inductor (tools/cli_checks.h)
  std::string inputs_dir;
  std::optional<uint64_t> seed;
  bool check = false;
  bool grad = false;  // with check: forward and backward, outputs and gradients judged (repro/training.h)
  std::optional<double> tol;  // the comparator's tolerance (default 1e-4, or a repro file's)
  std::string dump_dir;
  std::string mode;  // the default compile mode for this run (compile_modes(); the others than default need inductor_cuda)
  std::string emit;  // "torch": also write DIR/<graph stem>.py beside the dumped inputs and outputs
};

int run_verify(const std::string& file) {
  graph::Graph g = graph::load_graph(file);
  graph::verify_graph(g, file);
  fmt::print("ok: {} nodes\n", g.nodes().size());
  return 0;
}

int run_fmt(const std::string& file, bool in_place) {
  const std::string text = read_input_file(file, "graph file");
  graph::Graph g = graph::parse_graph(text, file);
  // Comments stay where they were (before their statement, or at the end of its line).
  // Constants read from .npy files stay references to those files.
  const std::string formatted = graph::print_graph_keeping_comments(g, text, file);
  if (!in_place) {
    fmt::print("{}", formatted);
    return 0;
  }
  // Never a file kiln cannot read back: the whole output is checked against the reader's limits and parsed
  // again before the file is touched.
  KILN_CHECK(int64_t(formatted.size()) <= kMaxTextFileBytes, "{}: the formatted graph has {} bytes, more than the "
             "{} MiB a graph file may have (docs/cli.md, Input files); the file is unchanged", file, formatted.size(),
             kMaxTextFileBytes >> 20);
  try {
    graph::parse_graph(formatted, file);
  } catch (const Error& e) {
    internal_fail("kiln fmt: the formatted graph does not parse ({}); the file is unchanged", e.what());
  }
  // Keeps the file's mode, writes through a symlink to its target, and keeps hard links one file.
  rewrite_file_in_place(file, formatted);
  return 0;
}

// "f32[2, 3]  min -1.2  max 2.3  mean 0.41  nan 0  inf 0  values [0.1, -0.5, ...]"
std::string summarize(const Tensor& t) {
  std::vector<double> v = t.to_double_vector();
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  int64_t nans = 0, infs = 0, finite = 0;
  for (double x : v) {
    if (std::isnan(x)) { ++nans; continue; }
    if (std::isinf(x)) ++infs;
    lo = std::min(lo, x), hi = std::max(hi, x);
    if (std::isfinite(x)) sum += x, ++finite;
  }
  std::string out = t.str();
  if (v.empty()) return out + "  (empty)";
  if (nans < int64_t(v.size())) out += fmt::format("  min {:.6g}  max {:.6g}", lo, hi);
  out += finite ? fmt::format("  mean {:.6g}", sum / double(finite)) : std::string("  mean -");
  if (is_floating(t.dtype())) out += fmt::format("  nan {}  inf {}", nans, infs);
  constexpr size_t kShown = 6;
  std::vector<std::string> shown;
  for (size_t i = 0; i < std::min(v.size(), kShown); ++i) shown.push_back(fmt::format("{:.6g}", v[i]));
  if (v.size() > kShown) shown.push_back("...");
  return out + fmt::format("  values [{}]", fmt::join(shown, ", "));
}

// `--emit torch`: the graph as a PyTorch script in the dump directory, reading the dumped inputs and
// comparing PyTorch's eager outputs with kiln's (output_<k>.npy).
void emit_torch_beside_dump(const graph::Graph& g, const RunArgs& a, const std::string& backend) {
  ReproFile r = make_repro(g, backend);
  r.input_dir = ".";
  const std::string path =
      (std::filesystem::path(a.dump_dir) / (std::filesystem::path(a.file).stem().string() + ".py")).string();
  write_file_atomic(path, minify::emit_torch(r, path));
  fmt::print("wrote {} (--emit torch): python3 {} [torch.compile backend | none]\n", terminal_safe(path), terminal_safe(path));
}

// `--check --grad`: the graph run for training on the backend against the reference's outputs and gradients.
int check_training(const graph::Graph& g, const std::vector<Tensor>& inputs, uint64_t seed, const RunArgs& a,
                   const std::string& backend, const CompileOptions& options, double tol) {
  KILN_CHECK(trains(g), "{}: --grad needs inputs marked `grad` (e.g. `%w: f32[4] grad`); graph {} has none", a.file,
             g.name);
  TrainingRun run = training_run(g);
  manual_seed(seed);
  const GeneratorState start = default_generator();
  std::vector<Tensor> got = run_training(backend, g, inputs, run, options);
  TrainingVerdict v = judge_training(g, run, got, training_baselines(g, inputs, run, start), tol);
  fmt::print("check of the outputs and gradients against the fp64 reference: {}\n", terminal_safe_lines(v.text));
  return v.ok ? 0 : 1;
}

int run_run(const RunArgs& a) {
  // A repro file runs its graph with its inputs and configuration (repro/graph_source.h), on its backend unless
  // --backend names another: what `kiln bisect` of a repro prints as its reproduce line.
  GraphSource src = load_graph_source(a.file, a.inputs_dir, a.seed);
  const std::string backend_name = a.backend ? *a.backend : src.backend_or(kDefaultBackend);
  const double tol = a.tol.value_or(src.tolerance_or(kDefaultTol));
  CompileOptions options;
  options.mode = a.mode.empty() ? "default" : a.mode;
  backend_entry(backend_name);  // an unknown name: the error lists the backends
  try {
    check_backend_options(backend_name, options);
  } catch (const Error& e) {
    fail("--mode {}: {}", options.mode, e.what());
  }
  const graph::Graph& g = src.graph;
  const uint64_t seed = src.seed;
  const std::vector<Tensor>& inputs = src.inputs;
  std::optional<OutputLock> dump_lock;  // two runs dumping into one directory fail rather than mix their files
  if (!a.dump_dir.empty()) {
    dump_lock.emplace(a.dump_dir);
    graph::save_inputs(g, inputs, a.dump_dir);
  }

  manual_seed(seed);  // random ops draw the same numbers in every run of this graph with this seed
  std::vector<Tensor> outputs;
  {
    NoGradGuard forward_only;  // the forward outputs, as the fp64 reference computes them (--grad trains below)
    outputs = compile_for_backend(backend_name, g, options)(graph::copy_inputs(inputs));
  }
  // File and value names are the user's: terminal_safe, so a name cannot move the cursor or retitle the window.
  fmt::print("{} ({} {}, backend {}):\n", terminal_safe(a.file), inputs.size(), terminal_safe(src.input_desc),
             terminal_safe(backend_name));
  for (size_t i = 0; i < outputs.size(); ++i) {
    fmt::print("  output {} %{}: {}\n", i, terminal_safe(g.value(g.outputs()[i]).name), summarize(outputs[i]));
    if (!a.dump_dir.empty())
      write_npy(confined_path(a.dump_dir, graph::output_file_name(i), "a dumped output").string(), outputs[i]);
  }
  if (!a.emit.empty()) emit_torch_beside_dump(g, a, backend_name);
  if (!a.check) return 0;
  if (a.grad) return check_training(g, inputs, seed, a, backend_name, options, tol);

  manual_seed(seed);
  CompareOptions co;
  co.tol = tol;
  CompareVerdict verdict = compare_to_baselines(comparison_baselines(g, inputs), outputs, co);
  fmt::print("check against the fp64 reference: {}\n", terminal_safe_lines(verdict.str()));
  return verdict.ok ? 0 : 1;
}

}  // namespace

void add_graph_commands(CLI::App& app, std::map<std::string, Runner>& runners) {
  static std::string verify_file;
  auto* verify = app.add_subcommand("verify", "parse and verify a .kir graph; prints `ok: N nodes` or the located "
                                              "error (exit 2)");
  verify->add_option("graph", verify_file, "the .kir file")->required();
  runners["verify"] = [] { return run_verify(verify_file); };

  static std::string fmt_file;
  static bool in_place = false;
  auto* fmt_cmd = app.add_subcommand("fmt", "print a .kir graph in canonical form");
  fmt_cmd->add_option("graph", fmt_file, "the .kir file")->required();
  fmt_cmd->add_flag("-i,--in-place", in_place, "rewrite the file in place (atomically; a file with hard links through its own inode) instead of printing it");
  runners["fmt"] = [] { return run_fmt(fmt_file, in_place); };

  static RunArgs run_args;
  auto* run = app.add_subcommand("run", "run a .kir graph (reference interpreter or a compiled backend) and summarise its outputs");
  run->add_option("graph", run_args.file, "the .kir file, or a repro file (its graph, inputs and configuration)")
      ->required();
  add_backend_option(*run, run_args.backend);
  run->add_option("--mode", run_args.mode,
                  "compile mode: default; with --backend inductor_cuda also reduce-overhead (the whole "
                  "program recorded once into a CUDA graph and replayed) or max-autotune (each kernel timed at a few "
                  "launch shapes at its first run, the fastest kept and cached on disk)")
      ->check(CLI::IsMember(compile_modes()));
  add_inputs_option(*run, run_args.inputs_dir, add_seed_option(*run, run_args.seed));
  run->add_flag("--check", run_args.check,
                "compare the outputs with the fp64 reference interpreter; exit 1 when they disagree");
  run->add_flag("--grad", run_args.grad,
                "with --check: run forward and backward (inputs marked `grad` get gradients through fixed tangents) "
                "and compare the outputs and the gradients")
      ->needs(run->get_option("--check"));
  add_tol_option(*run, run_args.tol)->needs(run->get_option("--check"));
  run->add_option("--dump", run_args.dump_dir,
                  "write the inputs (<name>.npy) and outputs (output_<k>.npy) into this directory");
  run->add_option("--emit", run_args.emit,
                  "with --dump DIR: also write DIR/<graph stem>.py, a PyTorch script of the graph that compares "
                  "PyTorch's outputs with kiln's")
      ->check(CLI::IsMember({"torch"}))
      ->needs(run->get_option("--dump"));
  runners["run"] = [] { return run_run(run_args); };
}

}  // namespace kiln::cli
