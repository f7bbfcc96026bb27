// The lowering table (lowerings.def): for every op, how the inductor lowers it (a pointwise scalar expression,
// a reduction, a view, a creation or a data body, each by a named rule function), or that its decomposition
// replaces it, or why it runs its eager kernel as an extern call. This header also gives the rules' types: what
// a rule sees of one call and what it returns (its body, or a Decision::no with the reason it cannot).
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "inductor/decision.h"
#include "inductor/ir.h"
#include "ops/op_info.h"

namespace kiln::inductor {

// The scalar expression of a value at an index (its body), and a lowered graph value: a pending pointwise body
// that users inline, or a view of a buffer.
using Loader = std::function<SExpr(const std::vector<Index>&)>;
struct LValue {
  Shape sizes;
  DType dtype = DType::F32;
  Loader load;
  bool pending = false;  // an unrealised pointwise value: users inline its body
  int cost = 1;          // estimated scalar ops of its body (a buffer load costs 1)
  // A realised value: a view of a buffer.
  int buffer = -1;
  Shape strides;
  int64_t offset = 0;
};

// The index of an operand of sizes `in_sizes` broadcast to the index `idx` of the result.
std::vector<Index> broadcast_index(const std::vector<Index>& idx, const Shape& in_sizes);

// ---- pointwise: the result as a function of the operands' scalars (every Tensor slot, in order)
using ScalarFn = std::function<SExpr(const std::vector<SExpr>&)>;
struct PointwiseCall {
  const OpCall& mc;  // the call on meta tensors
  OpId id;
  DType out_dt;      // the result's dtype
  DType cdt;         // its compute dtype
  DType common;      // the two first operands' promoted dtype (torch.result_type), in its compute form
};
struct PointwiseBody {
  Decision decision;
  ScalarFn fn;
};

// ---- reductions: which dims, which accumulation, in which dtype
struct ReductionCall {
  const OpCall& mc;
  OpId id;
  DType out_dt;
};
struct ReductionBody {
  Decision decision;
  std::vector<int64_t> dims;
  ReduceOp reduce = ReduceOp::Sum;
  DType acc_dt = DType::F32;
  bool divide_by_count = false;  // mean: the total divided by the number of reduced elements
};

// ---- views: the input's index as a function of the result's
using IndexMap = std::function<std::vector<Index>(const std::vector<Index>&)>;
struct ViewCall {
  const OpCall& mc;
  OpId id;
  Shape in_sizes;
  Shape out_sizes;
};
struct ViewBody {
  Decision decision;
  IndexMap map;
  bool in_eager_storage = false;  // as_strided: addressed in eager's storage of the input (lowering.cpp)
};

// ---- creation: a body over the result's index
struct CreationCall {
  const OpCall& mc;
  OpId id;
  DType dt;
};
struct CreationBody {
  Decision decision;
  Loader body;
};

// ---- data: a body over the result's index reading the first operand `in`
struct DataCall {
  const OpCall& mc;
  OpId id;
  const TensorMeta& out;
  const LValue& in;
};
struct DataBody {
  Decision decision;
  Loader body;
  int cost = 2;
};

// The rule functions the table names (pw_* in lower_pointwise.cpp, the others in lowering_rules.cpp).
#define KILN_LOWERED(id, how, rule, note) how##Body rule(const how##Call&);
#define KILN_DECOMPOSED(id)
#define KILN_EXTERN(id, reason)
#include "inductor/lowerings.def"
#undef KILN_LOWERED
#undef KILN_DECOMPOSED
#undef KILN_EXTERN

enum class LoweringHow : uint8_t { Pointwise, Reduction, View, Creation, Data, Decomposed, Extern };
std::string_view lowering_how_name(LoweringHow how);  // "pointwise", ..., "decomposed", "extern"

struct LoweringRow {
  OpId op{};
  LoweringHow how = LoweringHow::Extern;
  PointwiseBody (*pointwise)(const PointwiseCall&) = nullptr;
  ReductionBody (*reduction)(const ReductionCall&) = nullptr;
  ViewBody (*view)(const ViewCall&) = nullptr;
  CreationBody (*creation)(const CreationCall&) = nullptr;
  DataBody (*data)(const DataCall&) = nullptr;
  // Extern: why the op runs its eager kernel. Lowered: which calls still do ("" when none).
  std::string_view text;
  bool lowered() const { return how != LoweringHow::Decomposed && how != LoweringHow::Extern; }
};

// The op's row, or null when lowerings.def has none (tests/test_lowering_table.cpp keeps that from happening).
const LoweringRow* lowering_row(OpId op);

}  // namespace kiln::inductor
