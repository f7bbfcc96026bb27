// `kiln verify`, `kiln fmt` and `kiln run`: check, canonicalise and execute .kir graphs. Errors in the file
// or its inputs are kiln::Errors (kiln.cpp prints them and exits 2); `run --check` exits 1 when the outputs
// disagree with the fp64 reference.
#include "tools/cmd_graph.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "api/backends.h"
#include "core/files.h"
#include "eager/npy.h"
#include "core/options.h"
#include "eager/philox.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "inductor/compile_options.h"
#include "minifier/emit.h"
#include "ops/api.h"
#include "repro/training.h"
#include "tools/cli_checks.h"

namespace kiln::cli {
namespace {

struct RunArgs {
  std::string file;
  std::string backend;  // --backend (tools/cli_checks.h: default inductor)
  std::string inputs_dir;
  std::optional<uint64_t> seed;
  bool check = false;
  bool grad = false;  // with check: forward and backward, outputs and gradients judged (repro/training.h)
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
  const std::string formatted = graph::print_graph_keeping_comments(g, text, file);
  if (in_place) write_file_atomic(file, formatted);  // keeps the file's mode; through a symlink, its target
  else fmt::print("{}", formatted);
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
void emit_torch_beside_dump(const graph::Graph& g, const RunArgs& a) {
  ReproFile r = make_repro(g, a.backend);
  r.input_dir = ".";
  const std::string path =
      (std::filesystem::path(a.dump_dir) / (std::filesystem::path(a.file).stem().string() + ".py")).string();
  write_file_atomic(path, minify::emit_torch(r, path));
  fmt::print("wrote {} (--emit torch): python3 {} [torch.compile backend | none]\n", path, path);
}

// `--check --grad`: the graph run for training on the backend against the reference's outputs and gradients.
int check_training(const graph::Graph& g, const std::vector<Tensor>& inputs, uint64_t seed, const RunArgs& a) {
  KILN_CHECK(trains(g), "{}: --grad needs inputs marked `grad` (e.g. `%w: f32[4] grad`); graph {} has none", a.file,
             g.name);
  TrainingRun run = training_run(g);
  manual_seed(seed);
  const GeneratorState start = default_generator();
  std::vector<Tensor> got = run_training(a.backend, g, inputs, run);
  TrainingVerdict v = judge_training(g, run, got, training_baselines(g, inputs, run, start), CompareOptions{}.tol);
  fmt::print("check of the outputs and gradients against the fp64 reference: {}\n", v.text);
  return v.ok ? 0 : 1;
}

int run_run(const RunArgs& a) {
  const BackendFn& backend = find_backend(a.backend);
  if (!a.mode.empty()) {
    KILN_CHECK(a.mode == "default" || a.backend == "inductor_cuda", "--mode {}: {}, which needs --backend "
               "inductor_cuda (not {})", a.mode, compile_mode_needs_cuda(a.mode), a.backend);
    set_default_compile_mode(a.mode);
  }
  graph::Graph g = graph::load_graph(a.file);
  graph::verify_graph(g, a.file);
  uint64_t seed = a.seed ? *a.seed : uint64_t(opt_int(Opt::Seed));
  std::vector<Tensor> inputs = a.inputs_dir.empty() ? graph::seeded_inputs(g, seed) : graph::load_inputs(g, a.inputs_dir);
  std::optional<OutputLock> dump_lock;  // two runs dumping into one directory fail rather than mix their files
  if (!a.dump_dir.empty()) {
    dump_lock.emplace(a.dump_dir);
    graph::save_inputs(g, inputs, a.dump_dir);
  }

  manual_seed(seed);  // random ops draw the same numbers in every run of this graph with this seed
  std::vector<Tensor> outputs = backend(g, graph::copy_inputs(inputs));
  fmt::print("{} ({} inputs {}, backend {}):\n", a.file, inputs.size(),
             a.inputs_dir.empty() ? fmt::format("from seed {}", seed) : "from " + a.inputs_dir, a.backend);
  for (size_t i = 0; i < outputs.size(); ++i) {
    fmt::print("  output {} %{}: {}\n", i, g.value(g.outputs()[i]).name, summarize(outputs[i]));
    if (!a.dump_dir.empty())
      write_npy(confined_path(a.dump_dir, graph::output_file_name(i), "a dumped output").string(), outputs[i]);
  }
  if (!a.emit.empty()) emit_torch_beside_dump(g, a);
  if (!a.check) return 0;
  if (a.grad) return check_training(g, inputs, seed, a);

  manual_seed(seed);
  CompareVerdict verdict = compare_to_baselines(comparison_baselines(g, inputs), outputs);
  fmt::print("check against the fp64 reference: {}\n", verdict.str());
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
  fmt_cmd->add_flag("-i,--in-place", in_place, "rewrite the file in place (atomically) instead of printing it");
  runners["fmt"] = [] { return run_fmt(fmt_file, in_place); };

  static RunArgs run_args;
  auto* run = app.add_subcommand("run", "run a .kir graph (reference interpreter or a compiled backend) and summarise its outputs");
  run->add_option("graph", run_args.file, "the .kir file")->required();
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
