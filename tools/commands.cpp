// Subcommand table of the CLI: `kiln ops` (the op table and what each row has), `kiln demo` (a small model
// computed eagerly with its gradients), the graph commands of tools/cmd_graph.cpp (`verify`, `fmt`, `run`),
// and the top-level `--help-options` / `--help-options-md` (the options table as text or Markdown).
#include "tools/commands.h"
#include "kiln_version.h"

#include "tools/cmd_aot.h"
#include "tools/cmd_bench.h"
#include "tools/cmd_bisect.h"
#include "tools/cmd_fuzz.h"
#include "tools/cmd_gate.h"
#include "tools/cmd_import.h"
#include "tools/cmd_minify.h"
#include "tools/cmd_repro.h"
#include "tools/cmd_trace.h"

#include <fmt/format.h>

#include <functional>
#include <map>

#include "core/options.h"
#include "autograd/autograd.h"
#include "ops/api.h"
#include "ops/op_info.h"
#include "eager/philox.h"
#include "import/aten_ops.h"
#include "core_aten_ops.h"
#include "inductor/lowering_table.h"
#include "minifier/hook.h"
#include "tools/cmd_graph.h"

namespace kiln::cli {
namespace {

std::map<std::string, Runner>& runners() {
  static std::map<std::string, Runner> r;
  return r;
}

// The op table; the inductor column is the op's row of the inductor's lowering table (inductor/lowerings.def,
// the rows the compiler lowers by): lowered to loop IR, decomposed into other ops, or an extern call (the reason
// follows the schema; for a lowered op, the calls that still run extern), `?` for an op without a row.
int run_ops(bool missing_only) {
  fmt::print("{:<24} {:<10} {:<5} {:<6} {:<4} {:<6} {:<10}  {}\n", "op", "kind", "diff", "eager", "vjp", "decomp",
             "inductor", "schema");
  int counts[3] = {};
  std::map<std::string, int> by_lowering;
  for (const OpInfo& op : all_ops()) {
    bool has[3] = {op.kernel != nullptr, op.vjp != nullptr, op.decomp != nullptr};
    for (int i = 0; i < 3; ++i) counts[i] += has[i];
    const inductor::LoweringRow* row = inductor::lowering_row(op.id);
    std::string column = !row ? "?" : row->lowered() ? "lowered" : std::string(inductor::lowering_how_name(row->how));
    std::string note = !row ? "no row in src/inductor/lowerings.def"
                       : row->text.empty() ? "" : row->lowered() ? "extern for " + std::string(row->text) : std::string(row->text);
    ++by_lowering[column];
    bool incomplete = (!op.kernel && !op.decomp) || (op.differentiable && !op.vjp && !op.decomp) ||
                      (op.kind == OpKind::Composite && !op.decomp) || (!op.infer && !op.decomp);
    if (missing_only && !incomplete) continue;
    auto mark = [](bool b) { return b ? "yes" : "-"; };
    fmt::print("{:<24} {:<10} {:<5} {:<6} {:<4} {:<6} {:<10}  {}{}\n", op.name, op_kind_name(op.kind),
               op.differentiable ? "yes" : "no", mark(has[0]), mark(has[1]), mark(has[2]), column, op.schema.str(),
               note.empty() ? "" : "  [" + note + "]");
  }
  fmt::print("\n{} ops: {} with an eager kernel, {} with a VJP, {} with a decomposition; inductor: {} lowered, {} "
             "decomposed, {} extern, {} unknown\n", all_ops().size(), counts[0], counts[1], counts[2],
             by_lowering["lowered"], by_lowering["decomposed"], by_lowering["extern"], by_lowering["?"]);
  return 0;
}

// The Core ATen ops (the list PyTorch tags torch.Tag.core, src/import/core_aten_ops.txt) that `kiln import`
// has no row for in its ATen table (src/import/aten_ops.cpp).
int run_ops_coverage() {
  std::vector<std::string> core, missing;
  std::string_view text = importer::kCoreAtenOpsText;
  std::string version;
  while (!text.empty()) {
    size_t end = std::min(text.find('\n'), text.size());
    std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    if (line.rfind("# Core ATen", 0) == 0) version = std::string(line.substr(line.find("PyTorch")));
    if (line.empty() || line[0] == '#') continue;
    core.emplace_back(line);
    if (!importer::aten_rows().count(line)) missing.emplace_back(line);
  }
  fmt::print("Core ATen ops ({}) kiln import cannot map: {} of {}\n", version.substr(0, version.find(',')),
             missing.size(), core.size());
  for (const std::string& op : missing) fmt::print("  aten.{}\n", op);
  return 0;
}

// A two-layer MLP with a cross-entropy loss, run eagerly; prints the loss and every parameter's gradient.
int run_demo() {
  manual_seed(0);
  Tensor x = randn({4, 3});
  Tensor target = Tensor::from_vector<int64_t>({0, 2, 1, 2}, {4});
  Tensor w1 = mul(randn({5, 3}), 0.5).detach().set_requires_grad(true);
  Tensor b1 = zeros({5}).set_requires_grad(true);
  Tensor w2 = mul(randn({3, 5}), 0.5).detach().set_requires_grad(true);
  Tensor b2 = zeros({3}).set_requires_grad(true);
  Tensor h = relu(linear(x, w1, b1));
  Tensor logits = linear(h, w2, b2);
  Tensor loss = cross_entropy(logits, target);
  loss.backward();
  fmt::print("kiln {} demo: loss = cross_entropy(linear(relu(linear(x, w1, b1)), w2, b2), target), eager\n\n", KILN_VERSION);
  fmt::print("x      {}\n", format_tensor(x));
  fmt::print("target {}\n", format_tensor(target));
  fmt::print("logits {}\n", format_tensor(logits));
  fmt::print("loss   {}\n\n", format_tensor(loss));
  fmt::print("grad w1 {}\n", format_tensor(w1.grad()));
  fmt::print("grad b1 {}\n", format_tensor(b1.grad()));
  fmt::print("grad w2 {}\n", format_tensor(w2.grad()));
  fmt::print("grad b2 {}\n", format_tensor(b2.grad()));
  return 0;
}

}  // namespace

void add_commands(CLI::App& app) {
  app.parse_complete_callback([] { load_options(); });
  install_repro_hook();  // KILN_REPRO_AFTER / KILN_REPRO_LEVEL in every command that compiles
  install_crash_report();  // a crash says so on stderr, with the repro saved before compiling (minifier/hook.h)
  // Printed while parsing; CLI::Success ends the program with exit code 0.
  app.add_flag_callback("--help-options", [] {
    fmt::print("{}", options_help_text());
    throw CLI::Success();
  }, "print the options table (KILN_* environment variables) and the log channels");
  app.add_flag_callback("--help-options-md", [] {
    fmt::print("{}", options_markdown());
    throw CLI::Success();
  }, "print the options table as Markdown (docs/options.md is this output)");

  auto* ops = app.add_subcommand("ops", "print the op table: per op, whether it has an eager kernel, a VJP, a "
                                        "decomposition, and what the inductor does with it (lowered, decomposed, "
                                        "extern with the reason)");
  static bool missing_only = false;
  ops->add_flag("--missing", missing_only, "list only ops that lack something they need");
  static bool coverage = false;
  ops->add_flag("--coverage", coverage, "list the Core ATen ops (PyTorch's list) that `kiln import` cannot map")
      ->excludes("--missing");
  runners()["ops"] = [] { return coverage ? run_ops_coverage() : run_ops(missing_only); };

  app.add_subcommand("demo", "run a small MLP with a cross-entropy loss eagerly and print its gradients");
  runners()["demo"] = [] { return run_demo(); };

  add_graph_commands(app, runners());
  add_repro_commands(app, runners());
  add_minify_commands(app, runners());
  add_gate_commands(app, runners());
  add_bench_commands(app, runners());
  add_fuzz_commands(app, runners());
  add_import_commands(app, runners());
  add_bisect_commands(app, runners());
  add_doctor_commands(app, runners());
  add_aot_commands(app, runners());
  add_trace_commands(app, runners());
}

int run_selected(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands()) {
    auto it = runners().find(sub->get_name());
    if (it != runners().end()) return it->second();
  }
  return 0;
}

}  // namespace kiln::cli
