// Builds the lowering table from lowerings.def: one LoweringRow per op, indexed by OpId.
#include "inductor/lowering_table.h"

#include <array>
#include <optional>

#include "core/error.h"

namespace kiln::inductor {

namespace {

// One overload per rule type, so a row whose rule does not fit its `how` does not compile.
LoweringRow lowered(OpId op, LoweringHow how, PointwiseBody (*f)(const PointwiseCall&), std::string_view note) {
  KILN_ASSERT(how == LoweringHow::Pointwise, "lowerings.def: a pointwise rule in a row of another kind");
  return LoweringRow{op, how, f, nullptr, nullptr, nullptr, nullptr, note};
}
LoweringRow lowered(OpId op, LoweringHow how, ReductionBody (*f)(const ReductionCall&), std::string_view note) {
  KILN_ASSERT(how == LoweringHow::Reduction, "lowerings.def: a reduction rule in a row of another kind");
  return LoweringRow{op, how, nullptr, f, nullptr, nullptr, nullptr, note};
}
LoweringRow lowered(OpId op, LoweringHow how, ViewBody (*f)(const ViewCall&), std::string_view note) {
  KILN_ASSERT(how == LoweringHow::View, "lowerings.def: a view rule in a row of another kind");
  return LoweringRow{op, how, nullptr, nullptr, f, nullptr, nullptr, note};
}
LoweringRow lowered(OpId op, LoweringHow how, CreationBody (*f)(const CreationCall&), std::string_view note) {
  KILN_ASSERT(how == LoweringHow::Creation, "lowerings.def: a creation rule in a row of another kind");
  return LoweringRow{op, how, nullptr, nullptr, nullptr, f, nullptr, note};
}
LoweringRow lowered(OpId op, LoweringHow how, DataBody (*f)(const DataCall&), std::string_view note) {
  KILN_ASSERT(how == LoweringHow::Data, "lowerings.def: a data rule in a row of another kind");
  return LoweringRow{op, how, nullptr, nullptr, nullptr, nullptr, f, note};
}

using Table = std::array<std::optional<LoweringRow>, size_t(kNumOps)>;

void add(Table& t, LoweringRow row) {
  KILN_ASSERT(!t[size_t(row.op)], "lowerings.def: two rows for one op");
  t[size_t(row.op)] = row;
}

Table build() {
  Table t;
#define KILN_LOWERED(id, how, rule, note) add(t, lowered(OpId::id, LoweringHow::how, &rule, note));
#define KILN_DECOMPOSED(id) add(t, LoweringRow{.op = OpId::id, .how = LoweringHow::Decomposed});
#define KILN_EXTERN(id, reason) add(t, LoweringRow{.op = OpId::id, .how = LoweringHow::Extern, .text = reason});
#include "inductor/lowerings.def"
#undef KILN_LOWERED
#undef KILN_DECOMPOSED
#undef KILN_EXTERN
  return t;
}

}  // namespace

std::string_view lowering_how_name(LoweringHow how) {
  switch (how) {
    case LoweringHow::Pointwise: return "pointwise";
    case LoweringHow::Reduction: return "reduction";
    case LoweringHow::View: return "view";
    case LoweringHow::Creation: return "creation";
    case LoweringHow::Data: return "data";
    case LoweringHow::Decomposed: return "decomposed";
    case LoweringHow::Extern: return "extern";
  }
  return "?";
}

const LoweringRow* lowering_row(OpId op) {
  static const Table table = build();
  const std::optional<LoweringRow>& row = table[size_t(op)];
  return row ? &*row : nullptr;
}

}  // namespace kiln::inductor
