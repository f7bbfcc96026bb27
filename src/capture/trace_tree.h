// The trace tree of a compiled function: one cache entry per guard set, each a tree of path pieces
// (compiled graphs and eager regions in order) joined by branch points keyed by the value observed there (a
// bool: two children; a number or elements: equality). A replay checks nothing but what the path reads:
// captured tensors where first used, eager regions' output metas, and the branch values.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "capture/backend.h"
#include "capture/guards.h"
#include "capture/trace.h"

namespace kiln::capture {

struct TreeNode {
  struct CompiledSegment {
    Segment segment;
    GraphProgram program;
  };
  std::vector<Step> steps;  // Graph or Eager, indexing segments / eager below
  std::vector<CompiledSegment> segments;
  std::vector<EagerRegion> eager;
  std::vector<std::pair<int, TraceValue>> introduced;  // (step index, captured/constant value), bound before it
  std::vector<int> introduced_ids;                     // their value ids
  // The end: a branch point with its children, or the exit with the outputs.
  bool is_exit = true;
  BranchPoint branch;
  std::vector<std::pair<std::vector<Scalar>, std::unique_ptr<TreeNode>>> children;
  std::vector<OutputLeaf> outputs;
  std::vector<int64_t> output_lengths;
};

struct CacheEntry {
  explicit CacheEntry(GuardSet g) : guards(std::move(g)) {}
  int id = 0;
  GuardSet guards;
  std::vector<std::pair<int, int>> arguments;  // (value id, leaf)
  std::unique_ptr<TreeNode> root;
  int num_values = 0;
  std::vector<int> written_back;  // argument/captured value ids some graph updates in place
  bool may_miss_midway = false;   // has branch points or eager regions (a replay can miss after a graph ran)
};

struct Compiler {
  BackendChoice backend;
  std::string function;  // "fn (file:line)"
};

// A new entry for `trace` (guards from the call), compiling its graphs.
std::unique_ptr<CacheEntry> make_entry(Trace trace, GuardSet guards, const Compiler& compiler, int id);

// Adds `trace` (whose call passed `entry`'s guards) to the tree. When it cannot (the entry is left
// unchanged), `difference` says where it parts from the cached trace: eager-region outputs of another shape
// (the trace belongs in an entry of its own), or anything else (a dependency the guards missed).
struct MergeOutcome {
  enum class Kind : uint8_t { Merged, EagerOutputsDiffer, Differs } kind = Kind::Merged;
  std::string difference;
};
MergeOutcome merge_trace(CacheEntry& entry, Trace& trace, const Compiler& compiler);

struct ReplayResult {
  bool hit = false;
  std::string miss_reason;  // when not hit
  Flat outputs;
};
// Runs the cached path for `args` (which passed the entry's guards). On a miss after graphs ran, the
// arguments and captured tensors they updated in place are restored.
ReplayResult replay(const CacheEntry& entry, const Flat& args);

// Every node of the tree (explain, counts).
int count_graphs(const CacheEntry& entry);

}  // namespace kiln::capture
