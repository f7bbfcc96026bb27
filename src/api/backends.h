// The backend registry: every way kiln can run a graph, by name. "eager" is the reference interpreter and
// "inductor" compiles with kiln::compile (cached per graph object call); tests register deliberately broken
// backends. `kiln run --backend`, repro files and the minifier all resolve backend names here.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace kiln {

using BackendFn = std::function<std::vector<Tensor>(const graph::Graph&, const std::vector<Tensor>&)>;
void register_backend(const std::string& name, BackendFn fn);
std::vector<std::string> backend_names();
// The backend called `name`; kiln::Error naming the available ones when there is none.
const BackendFn& find_backend(const std::string& name);

}  // namespace kiln
