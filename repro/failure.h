// What went wrong, and when two failures are "the same" (decision 8): the one FailureKind every tool shares
// (the minifier, `kiln repro run`, the repro hook, gating, the bisector and the fuzzer), the failure signature
// (kind, message, stage) and the same-failure rules. Kinds are strings only at the file boundary (repro
// files, state files, CLI output): failure_kind_name and parse_failure_kind convert.
#pragma once
#include <exception>
#include <ostream>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace kiln {

struct IsolatedResult;

enum class FailureKind : uint8_t {
  None,          // it ran and matched the fp64 reference
  CompileError,  // the backend's compiler raised a CompileError
  RuntimeError,  // running the (compiled) graph raised an error
  Crash,         // the run died by a signal (or ended without a result)
  Hang,          // no result within the time limit
  Accuracy,      // the comparator (graph/compare.h) fails against the fp64 reference
  Invalid,       // the graph's own fp64 reference run fails: it cannot show a backend bug (never in a file)
};

// "none", "compile_error", "runtime_error", "crash", "hang", "accuracy", "invalid".
std::string_view failure_kind_name(FailureKind k);
// The kind a file or flag names (`where` says which, for the message); Invalid is not one a file may record.
// Unknown text is a kiln::Error listing the valid kinds.
FailureKind parse_failure_kind(std::string_view text, std::string_view where);
inline std::ostream& operator<<(std::ostream& os, FailureKind k) { return os << failure_kind_name(k); }

struct FailureSignature {
  FailureSignature() = default;
  FailureSignature(FailureKind kind, std::string message, std::string stage = "")
      : kind(kind), message(std::move(message)), stage(std::move(stage)) {}
  FailureKind kind = FailureKind::None;
  std::string message;  // the error message, the signal, or the comparator's verdict
  std::string stage;    // the compiler stage that raised a compile error (CompileError::stage), when known
  bool failed() const { return kind != FailureKind::None; }
};

// Errors equal "modulo names, numbers and source locations": a node's ` (line L:C)` is dropped, %value names
// and numbers are masked (`%x_3` -> `%_`, `17` -> `N`).
std::string normalize_failure_message(const std::string& msg);

// How strictly `same_failure` matches. The default is `kiln repro run`'s rule; the minifier adds the signal
// (a reduction must not drift from one crash to another) and, with --check-str, a substring for errors.
struct SameFailureRules {
  std::string check_str;           // errors: a message containing this instead of the normalised message
  bool signal_must_match = false;  // crashes: the same signal (the message), not just any crash
};

// The same-failure rules: the same kind, and
//   compile_error, runtime_error  the same message modulo names and numbers (or containing check_str)
//   crash                         with signal_must_match, the same signal
//   hang, accuracy, none          nothing more (an accuracy failure is the comparator's verdict)
bool same_failure(const FailureSignature& expected, const FailureSignature& actual,
                  const SameFailureRules& rules = {});

// The failure an exception thrown by a backend stands for: compile_error (with its stage) or runtime_error.
FailureSignature failure_of_exception(const std::exception& e);

// How a forked child reports a failure signature to its parent: "<kind>[@<stage>]\n<message>", and back
// (decode_failure throws kiln::Error on an unknown kind).
std::string encode_failure(const FailureSignature& f);
FailureSignature decode_failure(const std::string& payload);

// The classification of an isolated child's result (isolate.h): a crash or hang is that failure; a body
// that threw is a runtime_error with its message; a body that returned sent an encoded failure signature.
FailureSignature classify(const IsolatedResult& r);

}  // namespace kiln

template <>
struct fmt::formatter<kiln::FailureKind> : fmt::formatter<std::string_view> {
  auto format(kiln::FailureKind k, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(kiln::failure_kind_name(k), ctx);
  }
};
