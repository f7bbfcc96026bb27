// Eager's storages for the values of a graph, worked out at compile time (shapes are static): which value owns
// the storage each value lives in (views, in-place results and the ops eager answers with their input share
// their input's), at which offset, and how many elements each storage holds. The inductor runs eager's view
// and in-place checks on it before lowering (storage_checks.h: the same functions and messages eager uses at
// run time), and addresses as_strided views and in-place writes through it, so a compiled program reads and
// writes exactly the elements eager does. The graph passes ask it which values an in-place write reaches.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "ops/storage_checks.h"

namespace kiln::graph {

class StorageModel {
 public:
  // Builds the model of `g` (a graph without Composite nodes, or with them left as opaque nodes).
  explicit StorageModel(const graph::Graph& g);

  // Eager's checks for every view and in-place write of the graph, in node order: as_strided must stay inside
  // its storage; in-place writes must not overlap themselves or their inputs. Throws kiln::Error as the
  // interpreter would (eager's message, after the node's label: `label(node)`, graph::node_label by default).
  void check(const std::function<std::string(const graph::Node&)>& label = {}) const;

  // The value whose storage `v` lives in (`v` itself unless it aliases another value's storage).
  graph::ValueId owner(graph::ValueId v) const { return entries_[size_t(v)].owner; }
  // Where `v` lies in its owner's storage (offset in elements, sizes, strides), as eager lays it out.
  StorageSpan span(graph::ValueId v) const;
  // Elements the storage owned by `owner` holds in eager.
  int64_t capacity(graph::ValueId owner) const { return entries_[size_t(owner)].capacity; }
  // Whether an in-place node of the graph writes the storage `v` lives in (through `v` or any alias of it).
  bool written_in_place(graph::ValueId v) const {
    return entries_[size_t(v)].owner != graph::kNoValue && entries_[size_t(entries_[size_t(v)].owner)].written;
  }

 private:
  struct Entry {
    graph::ValueId owner = graph::kNoValue;
    int64_t offset = 0;
    int64_t capacity = 0;  // for owners
    bool written = false;  // for owners: an in-place node writes this storage
  };
  const graph::Graph& g_;
  std::vector<Entry> entries_;
  void own(graph::ValueId v);
  void model_node(const graph::Node& n);
  void check_node(const graph::Node& n) const;
};

}  // namespace kiln::graph
