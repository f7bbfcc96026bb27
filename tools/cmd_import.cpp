// `kiln import` (cmd_import.h): reads the archive through src/import, then writes DIR/<stem>.kir and the
// weights as DIR/<input>.npy (named by graph::input_file_name, so `kiln run --inputs DIR` reads them), every
// file atomically and nothing outside DIR.
#include "tools/cmd_import.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/escape.h"
#include "core/files.h"
#include "eager/npy.h"
#include "graph/inputs.h"
#include "graph/text.h"
#include "import/pt2.h"
#include "tools/cli_checks.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;

struct ImportArgs {
  std::string archive, out_dir, decompose = "core";
};

// The archive's stem as a graph name: letters, digits and '_' ("resnet-18.pt2" -> resnet_18).
std::string graph_name_for(const std::string& archive) {
  std::string name = fs::path(archive).stem().string();
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) name = "g_" + name;
  return name;
}

int run_import(const ImportArgs& a) {
  importer::ImportOptions options;
  options.decompose = a.decompose == "core";
  importer::ImportedModel model = importer::import_pt2(a.archive, options);
  const std::string stem = fs::path(a.archive).stem().string();
  model.graph.name = graph_name_for(a.archive);
  const std::string dir = a.out_dir.empty() ? stem : a.out_dir;
  create_output_directory(dir);
  OutputLock lock(dir);
  for (const auto& [input, value] : model.weights)
    write_npy(confined_path(dir, graph::input_file_name(input), "a weight file").string(), value);
  const std::string kir = confined_path(dir, stem + ".kir", "the graph file").string();
  graph::save_graph(model.graph, kir);
  fmt::print("imported {}: {} op nodes, {} inputs ({} weights written to {}/), {} outputs -> {}\n",
             terminal_safe(a.archive), model.graph.num_op_nodes(), model.graph.inputs().size(), model.weights.size(),
             terminal_safe(dir), model.graph.outputs().size(), terminal_safe(kir));
  std::string user_files;
  for (const std::string& input : model.user_inputs) user_files += " " + graph::input_file_name(input);
  fmt::print("run it: put{} in {}/, then kiln run {} --inputs {}\n", user_files, dir, kir, dir);
  return 0;
}

}  // namespace

void add_import_commands(CLI::App& app, std::map<std::string, Runner>& runners) {
  static ImportArgs args;
  auto* cmd = app.add_subcommand("import", "convert a torch.export archive (.pt2) to a .kir graph and .npy weights");
  cmd->add_option("archive", args.archive, "the .pt2 file (torch.export.save, PyTorch >= 2.6)")->required();
  add_output_option(*cmd, args.out_dir, "output directory (default: the archive's stem, in the current directory)",
                    /*old_out_alias=*/true);
  cmd->add_option("--decompose", args.decompose,
                  "core: an ATen op may become several kiln ops; none: only one-to-one mappings")
      ->check(CLI::IsMember({"core", "none"}))
      ->default_str("core");
  runners["import"] = [] { return run_import(args); };
}

}  // namespace kiln::cli
