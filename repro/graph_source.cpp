// load_graph_source (repro/graph_source.h): a .kir graph or a repro file, its inputs and configuration.
#include "repro/graph_source.h"

#include <fmt/format.h>

#include "core/files.h"
#include "core/seed.h"
#include "graph/inputs.h"
#include "graph/text.h"
#include "graph/verify.h"
#include "repro/reproduce.h"

namespace kiln {

bool looks_like_repro(std::string_view text) {
  return text.rfind("kiln-repro:", 0) == 0 || text.find("\nkiln-repro:") != std::string_view::npos;
}

GraphSource load_graph_source(const std::string& file, const std::string& inputs_dir, std::optional<uint64_t> seed) {
  GraphSource s;
  s.file = file;
  const std::string text = read_input_file(file, "graph or repro file");
  if (looks_like_repro(text)) {
    s.repro = parse_repro(text, file);
    s.applied = std::make_unique<AppliedReproConfig>(*s.repro);  // KILN_SEED of the repro included
    s.graph = s.repro->graph;
  } else {
    s.graph = graph::parse_graph(text, file);
    graph::verify_graph(s.graph, file);
  }
  s.seed = seed.value_or(opt_seed());
  if (!inputs_dir.empty()) {
    s.inputs = graph::load_inputs(s.graph, inputs_dir);
    s.inputs_dir = inputs_dir;
    s.input_desc = "inputs from " + inputs_dir;
  } else if (s.repro && !seed) {
    s.inputs = repro_inputs(*s.repro, file);
    s.input_desc = "inputs from the repro";
  } else {
    s.inputs = graph::seeded_inputs(s.graph, s.seed);
    s.input_seed = s.seed;
    s.input_desc = fmt::format("inputs from seed {}", s.seed);
  }
  return s;
}

RunLine GraphSource::run_line() const {
  RunLine l;
  l.file = file;
  l.seed = input_seed;
  l.inputs_dir = inputs_dir;
  return l;
}

}  // namespace kiln
