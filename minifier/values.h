// Recorded reference values for the minifier: one fp64 reference run of the original graph records every
// value (floating values in f64, others in their dtype), so that a candidate can turn any intermediate into an
// input carrying its recorded value, and an accuracy candidate can be judged against recorded fp64 outputs
// instead of re-running the reference. Values stay in memory up to a byte budget and spill to one unlinked
// temporary file beyond it (a 10000-node graph over 64K-element tensors holds 5 GB of fp64 intermediates).
// The in-memory values live in a shared memory file (memfd) mapped MAP_SHARED, not on the heap: fork() copies
// the page tables of private memory only, so a minifier holding 256 MB of values forks every candidate child
// as cheaply as an empty one (figures: docs/benchmarks.md, Figures behind code comments). Forked oracle children read values through the inherited mapping and file
// descriptor; get() always hands out a copy, so a child can never write into the parent's values.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "eager/philox.h"
#include "graph/graph.h"

namespace kiln::minify {

// A failure of the store itself (creating, growing, writing or reading its files: a full disk, a bad
// --spill-dir), as opposed to one of the graph: reported as what it is, never as the graph's failure.
class ValueStoreError : public Error {
 public:
  using Error::Error;
};

class ValueStore {
 public:
  // budget_bytes: how much stays in memory; spill_dir: where the spill file lives (empty: the system temp
  // directory). The file is unlinked as soon as it is created, so nothing is left behind, even after a kill.
  ValueStore(int64_t budget_bytes, std::string spill_dir = "");
  ~ValueStore();
  ValueStore(const ValueStore&) = delete;
  ValueStore& operator=(const ValueStore&) = delete;

  void put(graph::ValueId id, const Tensor& value);  // copies (the interpreter may mutate or free it)
  bool has(graph::ValueId id) const;
  // A fresh contiguous copy of the recorded value. Throws kiln::Error if nothing was recorded for `id`.
  // put() and get() throw ValueStoreError when the files fail.
  Tensor get(graph::ValueId id) const;

  int64_t memory_bytes() const { return memory_bytes_; }
  int64_t spilled_bytes() const { return spilled_bytes_; }

 private:
  struct Entry {
    TensorMeta meta;         // contiguous meta of the value
    bool in_memory = false;  // in the shared memory file (else in the spill file)
    int64_t offset = -1;     // byte offset in its file; -1: nothing recorded
  };
  static constexpr int64_t kAlign = 64;  // each in-memory value starts on a cache line (Storage's alignment)
  int64_t budget_, memory_bytes_ = 0, memory_end_ = 0, spilled_bytes_ = 0;
  std::string spill_dir_;
  int spill_fd_ = -1;
  int memory_fd_ = -1;
  char* memory_ = nullptr;  // memory_fd_ mapped MAP_SHARED, budget_ bytes of address space
  std::vector<Entry> entries_;  // by ValueId
};

// Runs the fp64 reference interpreter over `g` with the generator at `seed_state` and records every value
// (graph inputs, constants, node outputs) into `store`. Throws kiln::Error when the reference run fails: such
// a graph cannot show a backend bug; a ValueStoreError from the store passes through as it is.
void record_reference(const graph::Graph& g, const std::vector<Tensor>& inputs, const GeneratorState& seed_state,
                      ValueStore& store);

}  // namespace kiln::minify
