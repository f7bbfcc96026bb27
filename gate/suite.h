// A gating suite: the graphs and repro files `kiln gate` checks. A suite is a directory (every `.kir` and
// `.repro` file below it, in path order; `<stem>.inputs/` beside a graph holds its .npy inputs) with an
// optional `gate.json` that sets per-entry options, or a `.json` manifest that lists its entries explicitly.
// The manifest format is docs/gate.md's; unknown keys are errors (a typo must not switch a check off).
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace kiln::gate {

enum class EntryKind { Graph, Repro };

struct Entry {
  std::string name;                // the path relative to the suite root ("attention.kir"): the key everywhere
  std::string path;                // the file, as kiln opens it
  EntryKind kind = EntryKind::Graph;
  // Graphs: inputs from .npy files in `inputs_dir`, else generated from `seed` (the manifest's, else --seed's).
  std::string inputs_dir;
  uint64_t seed = 0;
  std::optional<double> tolerance;  // comparator tolerance; unset: the run's --tol
  std::optional<double> timeout_s;  // unset: the run's --timeout
  std::optional<bool> gradients;    // "grad": judge outputs then gradients (unset: the run's --grad)
  std::string skip_reason;          // non-empty: reported as skipped, not run
};

struct Suite {
  std::string root;  // the directory entry names are relative to
  std::vector<Entry> entries;
};

// Reads SUITE (a directory or a .json manifest); graph entries without a manifest "seed" get `default_seed`
// (`kiln gate --seed`). Bad input (missing path, malformed manifest, an entry that names a missing file or one
// outside the suite) is a kiln::Error naming the file and what to change.
Suite load_suite(const std::string& path, uint64_t default_seed = 0);

}  // namespace kiln::gate
