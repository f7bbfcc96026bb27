// What one traced run of a compiled function recorded (the recorder builds it, the trace tree compiles and
// replays it): the values the trace saw, its graph segments, the eager regions between them, and the branch
// points (graph breaks whose value selects what follows), in order, ending with the outputs.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "capture/site.h"
#include "graph/graph.h"

namespace kiln::capture {

// Where a traced tensor value comes from.
enum class ValueSource : uint8_t {
  Argument,  // a tensor leaf of the arguments (TraceValue::leaf)
  Captured,  // a tensor the function read that is not an argument (a weight): bound by identity, guarded
  Constant,  // a tensor the function made itself without an op (Tensor::from_vector ...): baked in
  Op,        // an output of a recorded op (in a graph segment)
  Eager,     // an output of an eager region (disable, an unsupported op)
};

struct TraceValue {
  ValueSource source = ValueSource::Op;
  std::string name;  // for messages and graph inputs: "x", "captured0", "t12"
  TensorMeta meta;
  int leaf = -1;                       // Argument: the leaf index
  Tensor constant;                     // Constant: the value
  std::weak_ptr<TensorImpl> captured;  // Captured: the object (identity guard)
  int written_back_to = -1;            // Op: the in-place op's result that is a new version of this value id
};

enum class BreakKind : uint8_t { Item, Bool, Elements, Disable, Print, UnsupportedOp, Autograd };
std::string_view break_kind_name(BreakKind k);

// One graph of the trace: its inputs and outputs as trace value ids, in graph input/output order.
struct Segment {
  graph::Graph graph;
  std::vector<int> inputs, outputs;
  // Graph outputs that are a new version of an argument or captured tensor (in-place ops): after a run the
  // result is copied into that tensor when the program returned another buffer. (output index, value id).
  std::vector<std::pair<int, int>> writebacks;
  std::vector<Tensor> example_inputs;  // the trace's tensors (for the backend's compile), dropped after it
  // Copies of the inputs' values when the trace read them (only with KILN_DEBUG_DIR: dumped beside the .kir).
  std::vector<Tensor> input_values;
};

// Code that runs eagerly on every call, between graphs: a kiln::disable region, kiln::print, an op capture
// cannot put in a graph. Its outputs' metas are checked on every call (later graphs were compiled for them).
struct EagerRegion {
  BreakKind kind = BreakKind::Disable;
  std::string reason;
  SourceSite site;
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> run;
  std::vector<int> inputs, outputs;
  std::vector<TensorMeta> output_metas;
};

// A graph break whose value decides what follows (item(), a bool, elements read): later calls read the value
// from the replayed tensor and follow the child recorded for it.
struct BranchPoint {
  BreakKind kind = BreakKind::Item;
  std::string reason;
  SourceSite site;
  int value = -1;
  std::vector<Scalar> observed;
};

struct Step {
  enum class Kind : uint8_t { Graph, Eager, Branch } kind;
  int index;  // into segments, eager or branches
};

// One output leaf: a traced tensor value, or a number (constant on this path: numbers that came from breaks
// are keyed by the branch).
struct OutputLeaf {
  int value = -1;  // -1: `number`
  Scalar number;
};

struct Trace {
  std::vector<TraceValue> values;
  std::vector<Segment> segments;
  std::vector<EagerRegion> eager;
  std::vector<BranchPoint> branches;
  std::vector<Step> steps;
  // The first step that uses each Captured/Constant value (bound when a replay reaches it).
  std::vector<std::pair<int, int>> introduced;  // (step index, value id)
  std::vector<OutputLeaf> outputs;
  std::vector<int64_t> output_lengths;
  int recorded_ops = 0;
};

}  // namespace kiln::capture
