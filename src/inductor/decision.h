// A compiler decision with its reason (XLA's FusionDecision): every yes/no the inductor takes (lower or fall
// back, fuse or not, keep a buffer local, stream a store) is a Decision value, so the reason travels with the
// answer into the decision log (KILN_LOGS=lowering,fusion,...) instead of through out-parameter strings.
#pragma once
#include <string>
#include <utility>

namespace kiln::inductor {

class [[nodiscard]] Decision {
 public:
  // Yes, with why (the reason is logged where the decision is acted on).
  static Decision yes(std::string reason = {}) { return Decision(true, std::move(reason)); }
  // No, with why not: a refusal always says what stood in the way.
  static Decision no(std::string reason) { return Decision(false, std::move(reason)); }

  explicit operator bool() const { return yes_; }
  bool is_yes() const { return yes_; }
  const std::string& reason() const { return reason_; }

 private:
  Decision(bool yes, std::string reason) : yes_(yes), reason_(std::move(reason)) {}
  bool yes_;
  std::string reason_;
};

}  // namespace kiln::inductor
