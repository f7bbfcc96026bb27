// `kiln import`'s reader: a torch.export archive (.pt2, written by torch.export.save, PyTorch >= 2.6) becomes a
// kiln graph. Parameters, buffers and tensor constants become graph inputs (their values returned beside
// the graph, so they can be written as .npy files for `kiln run --inputs`), then the user inputs; every node
// maps to kiln ops through the table in aten_ops.h, with kiln's own shape inference giving the result types,
// checked against the metadata the archive records. docs/import.md describes the format and the limits.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "eager/tensor.h"
#include "graph/graph.h"

namespace kiln::importer {

struct ImportOptions {
  // true (`--decompose core`): an ATen op without a kiln row of its own may become several kiln ops (e.g.
  // native_layer_norm's mean and rstd outputs); false (`none`): only ops with a one-to-one kiln row import.
  bool decompose = true;
};

struct ImportedModel {
  graph::Graph graph;
  // Graph inputs that hold the model's state (parameters, buffers, constants) with their values, in input order.
  std::vector<std::pair<std::string, Tensor>> weights;
  std::vector<std::string> user_inputs;  // the other graph inputs, by kiln value name
};

// Reads and converts the archive at `path`. Throws kiln::Error for anything malformed or unsupported: the
// message names the archive and the entry, node or op; ops without a mapping are all listed in one error.
ImportedModel import_pt2(const std::string& path, const ImportOptions& options = {});

// A payload's tensor: `sizes` of `dtype` at `strides` from element `offset` of the storage bytes `storage`,
// copied out contiguous. Every extent is computed with overflow checks: a layout that reaches outside
// `storage`, or whose extent does not fit in 64 bits, is a kiln::Error naming `what`; nothing outside
// `storage` is read.
Tensor tensor_from_storage(std::string_view storage, const Shape& sizes, DType dtype, const Shape& strides,
                           int64_t offset, const std::string& what);

}  // namespace kiln::importer
