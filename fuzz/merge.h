// `kiln fuzz merge DIR... -o OUT`: the findings of N fuzz workers (each `kiln fuzz --shard K/N -o DIR`, on one machine
// or many) as one campaign's: one bucket per root cause across all of them (the bucket key each worker computed:
// kind, stage, subsystem and op when the bisector explained the finding), hits summed, the smallest repro of each
// bucket kept (fewest op nodes, then fewest elements; ties by seed, index, variant) with the others listed, and
// coverage, graph counts and infer gaps summed. Each summary lists the runs it is made of (a random id per
// `kiln fuzz` process), so merging is idempotent and order-independent: a summary whose runs are all merged
// already adds nothing, one that shares only some of them is refused (its share cannot be told apart), and the
// inputs are combined largest first, then in the order of their run ids, whatever order they were given in.
#pragma once
#include <string>
#include <vector>

#include "fuzz/fuzzer.h"

namespace kiln::fuzz {

// The merged summary of `summaries` (each one's `where` names it in errors). Pure: repro paths are kept as given.
FuzzSummary merge_summaries(std::vector<FuzzSummary> summaries, const std::vector<std::string>& where);

// Reads DIR/summary.json of each directory, merges them, copies each kept repro (with its .inputs/ and
// .state.json) into `out` (a new or empty directory) and writes out/summary.json atomically.
FuzzSummary merge_fuzz_directories(const std::vector<std::string>& dirs, const std::string& out);

}  // namespace kiln::fuzz
