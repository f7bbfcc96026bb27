// The one error type of kiln. Library code throws kiln::Error for every user error (bad shapes, dtypes,
// indices, arity, malformed files); only the CLI turns it into a message and an exit code.
#pragma once
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::runtime_error {
 public:
  explicit Error(std::string msg, bool internal = false) : std::runtime_error(std::move(msg)), internal_(internal) {}
  // A broken invariant inside kiln (a bug, never the user's input): the CLI reports it as an internal error
  // (exit 3) where other errors are bad input (exit 2). Tools that classify failures treat it like any error
  // of its class.
  bool internal() const { return internal_; }

 private:
  bool internal_;
};

// An error raised while compiling a graph (lowering, code generation, JIT), as opposed to running it. Tools
// classify failures by it: compile_error vs runtime_error. kiln::compile turns every failure of the compiler
// itself (a broken invariant, a std::exception) into an internal CompileError.
// `stage()` names the compiler stage that failed (e.g. "inductor/codegen"), when known; repro files record it.
class CompileError : public Error {
 public:
  explicit CompileError(std::string msg, std::string stage = "", bool internal = false)
      : Error(std::move(msg), internal), stage_(std::move(stage)) {}
  const std::string& stage() const { return stage_; }

 private:
  std::string stage_;
};

template <class... A>
[[noreturn]] void fail(fmt::format_string<A...> f, A&&... a) {
  throw Error(fmt::format(f, std::forward<A>(a)...));
}

// Throws an internal kiln::Error: for conditions that only a bug in kiln can break.
template <class... A>
[[noreturn]] void internal_fail(fmt::format_string<A...> f, A&&... a) {
  throw Error(fmt::format(f, std::forward<A>(a)...), /*internal=*/true);
}

}  // namespace kiln

// KILN_CHECK(cond, fmt, args...): throws kiln::Error with the formatted message when cond is false.
#define KILN_CHECK(cond, ...) \
  do {                        \
    if (!(cond)) ::kiln::fail(__VA_ARGS__); \
  } while (0)
// KILN_ASSERT(cond, fmt, args...): the same for invariants (an internal error when cond is false).
#define KILN_ASSERT(cond, ...) \
  do {                         \
    if (!(cond)) ::kiln::internal_fail(__VA_ARGS__); \
  } while (0)
