// The op-simplification table (see simpler_op.h): targets by signature, built once from the op table.
#include "minifier/simpler_op.h"

#include <array>
#include <string_view>
#include <vector>

namespace kiln::minify {

namespace {

// The simplest op of each signature, in the order a target is chosen when two share one.
constexpr std::array<std::string_view, 4> kTargets = {"neg", "add", "mul", "sum"};

// The same arguments in the same places: types, optionality and defaults; names only where a keyword names
// them (a node's args are positional, so pow's `exponent` is mul's `other`).
bool same_signature(const OpInfo& a, const OpInfo& b) {
  if (a.kind != b.kind || a.schema.returns_list != b.schema.returns_list ||
      a.schema.num_returns != b.schema.num_returns || a.schema.args.size() != b.schema.args.size())
    return false;
  for (size_t i = 0; i < a.schema.args.size(); ++i) {
    const ArgSpec &x = a.schema.args[i], &y = b.schema.args[i];
    if ((x.kwarg_only && x.name != y.name) || x.type != y.type || x.optional != y.optional || x.kwarg_only != y.kwarg_only ||
        x.mutated != y.mutated || x.default_value.has_value() != y.default_value.has_value())
      return false;
    if (x.default_value && x.default_value->str() != y.default_value->str()) return false;
  }
  return true;
}

bool plain(const OpInfo& op) {
  return !op.is_inplace() && !op.is_view() && op.family != "random";
}

std::vector<std::optional<OpId>> build_table() {
  const std::vector<OpInfo>& ops = all_ops();
  std::vector<std::optional<OpId>> table(ops.size());
  for (std::string_view name : kTargets) {
    const OpInfo* target = find_op(name);
    if (!target) continue;
    for (const OpInfo& op : ops)
      if (!table[size_t(op.id)] && op.id != target->id && plain(op) && same_signature(op, *target))
        table[size_t(op.id)] = target->id;
  }
  for (std::string_view name : kTargets)  // a target is never replaced, even by an earlier target
    if (const OpInfo* target = find_op(name)) table[size_t(target->id)].reset();
  return table;
}

}  // namespace

std::optional<OpId> simpler_op(OpId op) {
  static const std::vector<std::optional<OpId>> table = build_table();
  return size_t(op) < table.size() ? table[size_t(op)] : std::nullopt;
}

}  // namespace kiln::minify
