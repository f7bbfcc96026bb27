// Guards: what a trace depended on, checked before a cached trace is replayed. Each argument tensor's dtype,
// sizes, strides, device and requires_grad, each number and bool, each vector's length, which tensor
// arguments are the same object, the grad mode and the kiln options that change compiled code. Captured
// tensors are guarded where a replay first reads them (trace_tree). A failed guard explains itself in
// Dynamo's words: "tensor 'x' size mismatch at index 0: expected 8, got 16".
#pragma once
#include <atomic>
#include <string>
#include <vector>

#include "capture/pytree.h"
#include "capture/trace.h"

namespace kiln::capture {

// "" when `t` matches `expected` (dtype, sizes, strides, device); else "<what> '<name>' ... mismatch ..." (the
// quoted name left out when empty).
std::string tensor_mismatch(std::string_view what, std::string_view name, const TensorMeta& expected, const Tensor& t);

// The options that change what a compiled function computes (the backend, bug injection, bisection, ...), as
// one comparable string.
std::string compiled_code_options(const std::string& backend);

class GuardSet {
 public:
  // The guards of a call with `args` (named by `leaf_names` / `length_names`) compiled for `backend`.
  static GuardSet of_call(const Flat& args, const std::vector<std::string>& leaf_names,
                          const std::vector<std::string>& length_names, const std::string& backend);
  // Whether every guard holds; when `why` is given and one fails, the failure's message goes there.
  bool check(const Flat& args, const std::string& backend, std::string* why = nullptr) const;
  // One line per guard (explain(), KILN_LOGS=guards).
  std::vector<std::string> describe() const;
  size_t size() const { return tensors_.size() + numbers_.size() + lengths_.size() + 2; }

 private:
  struct TensorGuard {
    int leaf;
    std::string name;
    TensorMeta meta;
    bool requires_grad;
    int same_as;  // the first earlier tensor leaf that is the same object, or -1
  };
  struct NumberGuard {
    int leaf;
    std::string name;
    Scalar value;
  };
  struct LengthGuard {
    std::string name;
    int64_t length;
  };
  std::vector<TensorGuard> tensors_;
  std::vector<NumberGuard> numbers_;
  std::vector<LengthGuard> lengths_;
  size_t num_leaves_ = 0;
  bool grad_mode_ = true;
  std::string options_;
  mutable std::atomic<uint64_t> options_checked_at_{0};  // options generation + 1 at the last passing check
  bool check_aliasing(const Flat& args, std::string* why) const;

 public:
  GuardSet() = default;
  GuardSet(GuardSet&& o) noexcept;
};

}  // namespace kiln::capture
