// Bug injection (decision 5): KILN_INJECT's `target:kind` entries, parsed once into a typed spec that every stage
// asks (InjectSpec::wants), and the one list of kinds (inject.cpp) with who takes each:
//   compile_error   the op's kernel does not compile (the inductor: invalid LLVM IR / CUDA C; inject_test: a
//                   CompileError before anything runs)
//   runtime_error   the op's kernel reports an error when it runs
//   crash           the op's kernel writes through a null pointer
//   accuracy        relu computes x + 1, other ops add 1 to their result; with the targets `fusion` (the
//                   scheduler fuses a consumer that reads a reduction at another row into the reduction's kernel,
//                   which then reads a row not written yet) and `partition` (the min-cut partitioner's backward
//                   computes each floating value it recomputes as value + 1: aot/partition_common.cpp)
//   decomposition   the op's decomposition is wrong (var and std ignore their correction; others add 1 to the
//                   first output): the inductor's decompose pass
//   vjp             AOT autograd records the op's VJP wrong (1 added to each gradient; aot/joint.h)
//   hang            the op's node never finishes: only the inject_test backend (minifier/inject_backend.h)
// The options table checks each entry's form when it is set (entry_problem); the compiler (inductor, AOT) refuses
// a spec with a kind only inject_test takes (InjectSpec::for_compiler). Nothing is injected unless asked for;
// when KILN_INJECT is empty each check is one branch on an empty list.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

enum class InjectKind : uint8_t { CompileError, RuntimeError, Crash, Accuracy, Decomposition, Hang, Vjp };

std::string_view inject_kind_name(InjectKind k);  // "compile_error", ...
std::optional<InjectKind> find_inject_kind(std::string_view name);
// Whether kiln's compiler (the inductor, AOT autograd) takes kind `k`; the others only the inject_test backend.
bool compiler_takes(InjectKind k);

struct InjectSpec {
  struct Entry {
    std::string target;  // an op name, "fusion" or "partition"
    InjectKind kind;
  };
  std::vector<Entry> entries;

  bool empty() const { return entries.empty(); }
  // The kind of `target`'s (first) entry, nullopt when none.
  std::optional<InjectKind> kind_for(std::string_view target) const;
  bool wants(std::string_view target, InjectKind kind) const { return kind_for(target) == kind; }
  // The position of `target`'s entry (-1 when none): kernels report an injected runtime error with it.
  int index_of(std::string_view target) const;
  std::string str() const;  // "relu:accuracy,fusion:accuracy", the cache key's part

  // A list in KILN_INJECT's form ("relu:accuracy,fusion:accuracy"; entries split at commas, spaces trimmed), as
  // an API caller passes one in CompileOptions::inject; `where` names the source in the error of a bad entry.
  static InjectSpec parse(std::string_view list, std::string_view where = "KILN_INJECT");
  // KILN_INJECT as set (the options table has checked each entry's form); notes that the settings were read
  // (core/fired.h: an entry that never fires is reported at the end of the run).
  static InjectSpec from_options();
  // from_options, for kiln's compiler (checked_for_compiler).
  static InjectSpec for_compiler();
  // This spec, for kiln's compiler: throws kiln::Error naming the valid kinds when an entry is one the compiler
  // does not take (hang), names no op, or a target other than an op takes a kind other than accuracy.
  InjectSpec checked_for_compiler() const;
};

// Whether an op of that name exists: KILN_INJECT's entries name ops, which the op table (above core) knows.
// The op table installs it (ops/registry.cpp); without it only an entry's form is checked.
using OpExists = bool (*)(std::string_view name);
void set_op_exists_check(OpExists check);

// The options table's check of one KILN_INJECT entry ("" when valid), and the entry form its messages quote.
std::string inject_entry_problem(std::string_view entry);
std::string_view inject_entry_form();

}  // namespace kiln
