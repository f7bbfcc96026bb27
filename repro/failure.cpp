// FailureKind names, the same-failure rules, and the child-to-parent encoding of a failure (failure.h).
#include "repro/failure.h"

#include <array>
#include <regex>

#include "core/error.h"
#include "repro/isolate.h"

namespace kiln {

namespace {

constexpr std::array<std::string_view, 7> kKindNames = {"none", "compile_error", "runtime_error", "crash",
                                                        "hang", "accuracy", "invalid"};

}  // namespace

std::string_view failure_kind_name(FailureKind k) { return kKindNames.at(size_t(k)); }

FailureKind parse_failure_kind(std::string_view text, std::string_view where) {
  for (size_t i = 0; i < kKindNames.size(); ++i)
    if (kKindNames[i] == text && FailureKind(i) != FailureKind::Invalid) return FailureKind(i);
  fail("{}: unknown failure kind '{}' (valid: none, compile_error, runtime_error, crash, hang, accuracy)", where,
       text);
}

std::string normalize_failure_message(const std::string& msg) {
  static const std::regex names(R"(%[A-Za-z_][A-Za-z0-9_.]*)"), numbers(R"([-+]?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?)");
  // Where the graph came from is not part of the failure: node_label (graph/interpreter.h) adds a node's
  // " (line L:C)" only to graphs parsed from text, so a minifier's in-memory candidate and the repro file
  // written from it must compare equal.
  static const std::regex location(R"( \(line [0-9]+:[0-9]+\))");
  std::string s = std::regex_replace(msg, location, "");
  s = std::regex_replace(s, names, "%_");
  s = std::regex_replace(s, numbers, "N");
  return s;
}

bool same_failure(const FailureSignature& expected, const FailureSignature& actual, const SameFailureRules& rules) {
  if (expected.kind != actual.kind) return false;
  switch (expected.kind) {
    case FailureKind::CompileError:
    case FailureKind::RuntimeError:
      if (!rules.check_str.empty()) return actual.message.find(rules.check_str) != std::string::npos;
      return normalize_failure_message(expected.message) == normalize_failure_message(actual.message);
    case FailureKind::Crash: return !rules.signal_must_match || expected.message == actual.message;
    default: return true;  // hang, accuracy, none, invalid: by kind
  }
}

FailureSignature failure_of_exception(const std::exception& e) {
  if (auto* c = dynamic_cast<const CompileError*>(&e)) return {FailureKind::CompileError, c->what(), c->stage()};
  return {FailureKind::RuntimeError, e.what()};
}

std::string encode_failure(const FailureSignature& f) {
  return fmt::format("{}{}\n{}", f.kind, f.stage.empty() ? "" : "@" + f.stage, f.message);
}

FailureSignature decode_failure(const std::string& payload) {
  const size_t nl = payload.find('\n');
  const std::string head = payload.substr(0, nl);
  const size_t at = head.find('@');
  const std::string kind = head.substr(0, at);
  FailureSignature f;
  f.kind = kind == "invalid" ? FailureKind::Invalid : parse_failure_kind(kind, "a child's failure report");
  if (at != std::string::npos) f.stage = head.substr(at + 1);
  if (nl != std::string::npos) f.message = payload.substr(nl + 1);
  return f;
}

FailureSignature classify(const IsolatedResult& r) {
  switch (r.kind) {
    case FailureKind::None: return decode_failure(r.payload);
    case FailureKind::RuntimeError: return {FailureKind::RuntimeError, r.payload};
    default: return {r.kind, r.payload};  // crash (the signal), hang
  }
}

}  // namespace kiln
