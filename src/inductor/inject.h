// Bug injection in the inductor (decision 5), parsed from KILN_INJECT: `op:kind` entries. Kinds for an op's
// lowering: compile_error (the kernel's LLVM IR is invalid), runtime_error (the kernel reports an error when
// it runs), crash (the kernel writes through a null pointer), accuracy (relu computes x + 1; other ops add 1
// to their result). `fusion:accuracy` makes the scheduler fuse a consumer that reads a reduction at another
// row into the reduction's kernel (it then reads a row that is not written yet). `<op>:decomposition` makes
// that op's decomposition wrong (var and std ignore their correction; others add 1 to the first output).
// `<op>:vjp` makes AOT autograd record that op's VJP wrong (1 added to each gradient; aot/joint.h).
// `partition:accuracy` makes the min-cut partitioner's backward compute each floating value it recomputes as
// value + 1 (aot/partition_common.cpp): aot_eager_decomp_partition (min-cut) fails, aot_eager passes.
// Nothing is injected unless asked for; when KILN_INJECT is empty each check is one branch on an empty set.
#pragma once
#include <string>
#include <vector>

namespace kiln::inductor {

struct InjectSpec {
  struct Entry {
    std::string target;  // an op name, "fusion" or "partition"
    std::string kind;    // compile_error, runtime_error, crash, accuracy, decomposition, vjp
  };
  std::vector<Entry> entries;

  bool empty() const { return entries.empty(); }
  // The kind injected into `target`, or "" when none.
  std::string kind_for(const std::string& target) const;
  // The position of `target`'s entry (-1 when none): kernels report an injected runtime error with it.
  int index_of(const std::string& target) const;
  // Reads KILN_INJECT; throws kiln::Error on a malformed entry (naming the valid kinds).
  static InjectSpec from_options();
  std::string str() const;
};

}  // namespace kiln::inductor
