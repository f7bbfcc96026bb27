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
  explicit Error(std::string msg) : std::runtime_error(std::move(msg)) {}
};

// An error raised while compiling a graph (lowering, code generation, JIT), as opposed to running it. Tools
// classify failures by it: compile_error vs runtime_error.
// `stage()` names the compiler stage that failed (e.g. "inductor/codegen"), when known; repro files record it.
class CompileError : public Error {
 public:
  explicit CompileError(std::string msg, std::string stage = "") : Error(std::move(msg)), stage_(std::move(stage)) {}
  const std::string& stage() const { return stage_; }

 private:
  std::string stage_;
};

template <class... A>
[[noreturn]] void fail(fmt::format_string<A...> f, A&&... a) {
  throw Error(fmt::format(f, std::forward<A>(a)...));
}

}  // namespace kiln

// KILN_CHECK(cond, fmt, args...): throws kiln::Error with the formatted message when cond is false.
#define KILN_CHECK(cond, ...) \
  do {                        \
    if (!(cond)) ::kiln::fail(__VA_ARGS__); \
  } while (0)
