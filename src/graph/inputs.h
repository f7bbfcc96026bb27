// Graph inputs: loading them from a directory of .npy files, or generating them from a seed. A seeded input
// set is fully described by (graph, seed), which is what repro files record when inputs are not stored.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"

namespace kiln::graph {

// Deterministic inputs for `g` from `seed`: floating inputs standard normal (Philox, see eager/philox.h);
// integer inputs uniform in [0, bound) where bound is derived from how the graph uses them (class targets of
// cross_entropy/nll_loss: the class count; indices of embedding/index_select/gather/index: the indexed dim's
// size; otherwise [0, 10)); bool inputs fair coins. Inputs marked `grad` get requires_grad.
std::vector<Tensor> seeded_inputs(const Graph& g, uint64_t seed);

// The one mapping from value names to file names in a directory of tensors (`kiln run --inputs/--dump`, a
// repro's inputs, the minifier's OUT.inputs/, emitted programs): safe_file_stem (core/files.h) plus ".npy", and
// the first byte of a name that would take a reserved file name (output_<k>, the dumped outputs) escaped.
// Injective, and never a path: %x -> x.npy, %h.1 -> h.1.npy,
// %"../../x" -> %2E.%2F..%2Fx.npy, %"/abs/x" -> %2Fabs%2Fx.npy, %output_0 -> %6Futput_0.npy.
std::string input_file_name(std::string_view value_name);
// The file output k is dumped to (`kiln run --dump`): output_<k>.npy, which no input's file name can be.
std::string output_file_name(size_t k);

// One .npy per graph input, named by input_file_name (%x -> DIR/x.npy); dtypes and shapes must match the graph.
// Each input gets the strides its graph input declares (a .npy holds values, not a layout), as seeded inputs do.
std::vector<Tensor> load_inputs(const Graph& g, const std::string& dir);

// Detached copies of `inputs` for one run, each with its original's strides when they are dense (a permuted,
// column-major or contiguous layout; otherwise contiguous) and storage offset 0. Every tool hands a backend
// and its reference such copies, so ops that read the storage itself (as_strided, in-place writes through
// views) see the same layout in both: clone() makes tensors contiguous, which as_strided can tell apart.
std::vector<Tensor> copy_inputs(const std::vector<Tensor>& inputs);
// One such copy, converted to `dtype` (the fp64 reference upcasts its inputs this way).
Tensor layout_preserving_copy(const Tensor& t, DType dtype);
void save_inputs(const Graph& g, const std::vector<Tensor>& inputs, const std::string& dir);

}  // namespace kiln::graph
