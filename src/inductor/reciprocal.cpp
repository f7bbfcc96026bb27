// The reciprocal-divisor rule (reciprocal.h).
#include "inductor/reciprocal.h"

#include <algorithm>
#include <functional>
#include <set>

namespace kiln::inductor {

bool divides_by_reciprocal(const SExpr& division, const std::vector<Index>& element_vars) {
  if (division->op != SOp::Div || division->args.size() != 2 || !is_floating(division->args[1]->dtype)) return false;
  if (element_vars.empty()) return false;
  auto depends = [&](const Index& ix) {
    return std::any_of(element_vars.begin(), element_vars.end(),
                       [&](const Index& v) { return !v.is_constant() && ix_depends_on(ix, v); });
  };
  bool reads = false;
  std::set<const SNode*> seen;
  std::function<bool(const SExpr&)> varies = [&](const SExpr& n) {
    if (!seen.insert(n.get()).second) return false;
    if (n->op == SOp::Load) {
      reads = true;
      return n->buffer != kAccumulatorBuffer && depends(n->index);
    }
    if (n->op == SOp::IndexValue) return depends(n->index);
    return std::any_of(n->args.begin(), n->args.end(), varies);
  };
  return !varies(division->args[1]) && reads;
}

}  // namespace kiln::inductor
