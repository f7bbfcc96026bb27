// Builds the lowering table from lowerings.def: one LoweringRow per op, indexed by OpId.
#include "inductor/lowering_table.h"

#include <array>
#include <optional>

#include "core/error.h"
#include "ops/custom.h"

namespace kiln::inductor {

namespace {

// One overload per rule type: a rule of no kind does not compile.
void set_rule(LoweringRow& r, PointwiseBody (*f)(const PointwiseCall&)) { r.pointwise = f; }
void set_rule(LoweringRow& r, ReductionBody (*f)(const ReductionCall&)) { r.reduction = f; }
void set_rule(LoweringRow& r, ViewBody (*f)(const ViewCall&)) { r.view = f; }
void set_rule(LoweringRow& r, CreationBody (*f)(const CreationCall&)) { r.creation = f; }
void set_rule(LoweringRow& r, DataBody (*f)(const DataCall&)) { r.data = f; }

LoweringHow rule_kind(const LoweringRow& r) {
  return r.pointwise ? LoweringHow::Pointwise : r.reduction ? LoweringHow::Reduction : r.view ? LoweringHow::View
         : r.creation ? LoweringHow::Creation : LoweringHow::Data;
}

template <class Rule>
LoweringRow lowered(OpId op, LoweringHow how, Rule rule, std::string_view note) {
  LoweringRow row{.op = op, .how = how, .text = note};
  set_rule(row, rule);
  KILN_ASSERT(rule_kind(row) == how, "lowerings.def: the row of op {} is {} but names a {} rule",
              op_info(op).name, lowering_how_name(how), lowering_how_name(rule_kind(row)));
  return row;
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
  // Custom ops (kiln::register_op) share one row: their kernels are opaque, so they run as extern calls.
  static const LoweringRow custom{.how = LoweringHow::Extern,
                                  .text = "custom op (kiln::register_op): its kernel is opaque to the inductor"};
  if (is_custom_op(op)) return &custom;
  static const Table table = build();
  const std::optional<LoweringRow>& row = table[size_t(op)];
  return row ? &*row : nullptr;
}

}  // namespace kiln::inductor
