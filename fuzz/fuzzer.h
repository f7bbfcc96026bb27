// `kiln fuzz`'s loop: generate graphs (fuzz/generator.h), pick inputs that keep the fp64 reference finite (a
// short input search), check each graph differentially (backend vs the fp64 interpreter through the
// comparator) and metamorphically (fusion off, a bisection limit, contiguous copies of strided inputs, the
// graph compiled in f64), each batch in a forked child (fuzz/check.h); classify and minify findings, bucket them
// by root cause (the bisector on each minimized finding: one bucket per bug, whatever graph showed it), write one
// repro per bucket, keep coverage, and summarise.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/shard.h"
#include "fuzz/check.h"
#include "repro/failure.h"
#include "fuzz/generator.h"

namespace kiln::fuzz {

struct FuzzOptions {
  GenOptions gen;
  CheckOptions check;
  uint64_t seed = 0;
  std::optional<uint64_t> runs;    // graphs to check (with time_s: whichever ends first)
  double time_s = 0;               // seconds to run (0: until `runs`)
  uint64_t first_index = 0;        // graph indices first_index, first_index + 1, ...
  // Of those, only shard K/N's: first_index + K - 1, first_index + K - 1 + N, ... (N workers of one seed check
  // disjoint graphs; `runs` counts this shard's).
  ShardSpec shard;
  bool metamorphic = true;         // besides the plain check, one metamorphic variant per graph
  int input_searches = 4;          // input seeds tried for a NaN/Inf-free reference
  std::string out_dir;             // repros of findings (empty: none written, findings not minified)
  int max_minify = 50;             // minifications per run (later findings are recorded unminified)
  std::function<void(const std::string&)> status;  // the live status line, when set
  // One line per failing graph that is minified (and bisected) as it is bucketed: those steps take seconds each.
  std::function<void(const std::string&)> progress;
  std::function<void(uint64_t, const graph::Graph&)> on_graph;  // every generated graph (--print)
};

// One bucket of findings: one bug. Its key is the root cause (failure kind, first failing stage, subsystem, and
// the op of the first bad application after decomposition) when the bisector explains the minimized graph's
// failure; else (not minimized, or nothing explains it) the failure kind and the minimized op structure, per
// variant. The representative is the first finding of the bucket; its repro is the one kept.
struct FindingRecord {
  std::string signature;  // the representative's failure kind + minimized op structure ("crash:batch_norm")
  std::string bucket;     // the key findings are grouped by
  RootCause cause;        // what the bisector said (outcome empty when it did not run)
  FailureKind kind = FailureKind::None;
  std::string message, variant, repro;
  uint64_t seed = 0, index = 0;
  uint64_t hits = 1;      // graphs that showed this bug (the representative included)
  bool minimized = false;
  std::string note;
  // The bucket's other minimized graphs (their repros are not kept: the representative's shows the bug).
  struct Other {
    uint64_t index = 0;
    std::string variant, signature;
    uint64_t seed = 0;
  };
  std::vector<Other> others;
  // The minimized graph's size (op nodes, then elements of its values): `kiln fuzz merge` keeps the smallest
  // repro of a bucket.
  uint64_t nodes = 0, elements = 0;
};

// One `kiln fuzz` process's run: what a merged summary is made of (fuzz/merge.h). `id` is unique per run.
struct RunRecord {
  std::string id, backend;
  uint64_t seed = 0, first_index = 0, graphs = 0;
  ShardSpec shard;
  double seconds = 0;
};

struct FuzzSummary {
  uint64_t graphs = 0, valid = 0, nan_free = 0, checks = 0;
  // Finite cases not checked because every input draw left a discontinuous op's argument within
  // kStepMarginUlps of a step (fuzz/domains.h).
  uint64_t near_steps = 0;
  double seconds = 0;
  std::vector<FindingRecord> findings;  // one per distinct bug
  std::map<CoverageKey, uint64_t> coverage;
  std::map<std::string, uint64_t> shape_coverage;    // op nodes by their output's shape class ("rank2", "empty")
  std::map<std::string, uint64_t> variant_coverage;  // checks by variant ("default", "unfused", ...)
  std::vector<RunRecord> runs;                       // one for a run; every merged run's for a merge
  // Calls shape inference accepted but the kernel refused while generating (FuzzCase::refused), by message
  // with numbers masked: gaps between an op's infer function and its kernel (graphs that verify, then fail).
  struct Gap {
    uint64_t count = 0, first_index = 0;
    std::string example;
  };
  std::map<std::string, Gap> infer_gaps;
  std::string json() const;            // the JSON summary (summary.json)
  std::string coverage_table() const;  // ops x dtypes, counts; then shape classes and variants
  std::string status_line() const;
};

FuzzSummary run_fuzz(const FuzzOptions& opts);
// summary.json read back; a malformed one is a kiln::Error naming `where` and the field.
FuzzSummary summary_from_json(const std::string& text, const std::string& where);
// The shape class coverage counts a value of `sizes` under: "empty" (no elements), else "rank<R>".
std::string shape_class(const std::vector<int64_t>& sizes);

// The variants a graph is checked in (name -> graph and options). "default" is the graph as generated; the
// metamorphic ones: "unfused" (KILN_BISECT_DISABLE=inductor:fusion), "bisect" (KILN_BISECT_LIMIT=inductor=K),
// "contiguous" (strided inputs given as contiguous copies), "f64" (every floating dtype made f64).
graph::Graph with_contiguous_inputs(const graph::Graph& g);
graph::Graph in_f64(const graph::Graph& g);

}  // namespace kiln::fuzz
