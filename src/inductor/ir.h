// The inductor's loop IR (modelled on TorchInductor's ir.py): buffers, and nodes whose body maps an index to
// a scalar expression. Index expressions are integer expressions over loop variables kept in a canonical
// affine form (constant + sum of coefficient * atom, an atom being a variable or a floor division / modulo
// of an index by a constant) and simplified as they are built, so a view lowers to index arithmetic and a
// reshape of a contiguous value folds back to plain strides. Scalar expressions are trees over the op set in
// scalar_ops.def. A node's body is a function of its index variables: inlining a producer into a consumer is
// calling the producer's body with the consumer's indices (Inductor's inner_fn).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "eager/tensor.h"

namespace kiln::inductor {

// ---------------------------------------------------------------- index expressions

struct IndexAtom;
using AtomPtr = std::shared_ptr<const IndexAtom>;

// constant + sum(coefficient * atom), terms sorted by the atom's key, no zero coefficients.
struct Index {
  int64_t constant = 0;
  std::vector<std::pair<AtomPtr, int64_t>> terms;

  bool is_constant() const { return terms.empty(); }
  std::string str() const;
  bool operator==(const Index& o) const { return str() == o.str(); }
};

struct IndexAtom {
  enum class Kind : uint8_t { Var, Div, Mod } kind = Kind::Var;
  int var = 0;          // Var: its id
  int64_t extent = 1;   // Var: it ranges over [0, extent)
  Index arg;            // Div / Mod: floor(arg / divisor), arg mod divisor (arg is never negative)
  int64_t divisor = 1;
  std::string key;      // canonical text ("i3", "(i1 + 4*i2)//5"): equality and order
};

// A fresh loop variable over [0, extent).
Index ix_var(int64_t extent);
Index ix_const(int64_t c);
Index ix_add(const Index& a, const Index& b);
Index ix_scale(const Index& a, int64_t k);
Index ix_div(const Index& a, int64_t divisor);  // floor division, divisor > 0
Index ix_mod(const Index& a, int64_t divisor);
// Inclusive bounds of the values `a` can take.
std::pair<int64_t, int64_t> ix_range(const Index& a);
// The coefficient of variable atom `var` (0 when absent or only inside a div/mod atom).
int64_t ix_coefficient(const Index& a, const Index& var);
// Whether `a` depends on variable `var` anywhere (also inside div/mod atoms).
bool ix_depends_on(const Index& a, const Index& var);
// offset + sum(strides[k] * idx[k]).
Index ix_strided(const std::vector<Index>& idx, const Shape& strides, int64_t offset);
// The row-major linear index of `idx` in a tensor of `sizes`.
Index ix_linear(const std::vector<Index>& idx, const Shape& sizes);
// The inverse: the multi-index (sizes) of a row-major linear index.
std::vector<Index> ix_unravel(const Index& linear, const Shape& sizes);
std::vector<Index> ix_vars(const Shape& sizes);

// ---------------------------------------------------------------- scalar expressions

enum class SOp : uint8_t {
#define KILN_SCALAR_OP(id, arity, doc) id,
#include "inductor/scalar_ops.def"
#undef KILN_SCALAR_OP
};
std::string_view sop_name(SOp op);

struct SNode;
using SExpr = std::shared_ptr<const SNode>;

// dtype is a compute dtype: bool, an integer type, f32 or f64 (f16/bf16 buffers load and store through f32).
struct SNode {
  SOp op = SOp::Const;
  DType dtype = DType::F32;
  std::vector<SExpr> args;
  Index index;           // Load, IndexValue
  int buffer = -1;       // Load
  double fvalue = 0;     // Const of a floating dtype
  int64_t ivalue = 0;    // Const of bool / integer dtype; Fail: the status code
  std::string helper;    // Helper: the runtime function's name
};

// The dtype values of `dt` compute in (f16/bf16 -> f32).
DType compute_dtype_of(DType dt);

SExpr s_const(double v, DType dt);
SExpr s_iconst(int64_t v, DType dt);
SExpr s_load(int buffer, Index index, DType buffer_dtype);
// In a reduction's finalize expression: the accumulator (a Load of this pseudo-buffer).
inline constexpr int kAccumulatorBuffer = -2;
// Float sums add at most this many elements along their innermost reduced loop into one partial (the compute
// dtype, vectorised) before the partial joins the sum's f64 total (backends/cpu/codegen_reduction.cpp emit_blocked_sum).
// docs/inductor.md, "Accumulation".
inline constexpr int64_t kSumBlock = 4096;
SExpr s_index_value(Index index);
SExpr s_cast(const SExpr& x, DType dt);  // to a compute dtype; returns x when it already has it
// x (f32) rounded to `narrow` (f16 or bf16) and widened back: an explicit conversion to a narrow float.
SExpr s_round_to(const SExpr& x, DType narrow);
SExpr s_unary(SOp op, const SExpr& x);
SExpr s_binary(SOp op, const SExpr& a, const SExpr& b);  // operands must share a dtype
SExpr s_where(const SExpr& c, const SExpr& a, const SExpr& b);
SExpr s_mul_add(const SExpr& x, const SExpr& y, const SExpr& z);  // x * y + z rounded once; floats of one dtype
SExpr s_helper(const std::string& name, DType dt, std::vector<SExpr> args);
SExpr s_wrap(SOp op, const SExpr& x);  // Trap / Invalid around x
// x, after setting the kernel's status word to `code` unless an earlier error set it (a reported runtime error).
SExpr s_fail(const SExpr& x, int64_t code);
// Estimated cost of evaluating the expression once per element, in simple vector ops (each shared node counted
// once): a load or an add is 1, a division or square root 4, a libm call (exp, log, sin, tanh, erf, ...) or a
// runtime helper kLibmCallCost. For realise-or-inline decisions.
inline constexpr int kLibmCallCost = 24;
int s_cost(const SExpr& e);
// Buffers an expression loads, with the index of each load.
void s_loads(const SExpr& e, std::vector<std::pair<int, Index>>& out);

// ---------------------------------------------------------------- buffers and nodes

struct Buffer {
  enum class Kind : uint8_t { Input, Constant, Intermediate } kind = Kind::Intermediate;
  std::string name;
  DType dtype = DType::F32;
  Shape sizes, strides;  // intermediates are contiguous; inputs have the graph's recorded strides
  int64_t offset = 0;    // elements
  int input_index = -1;  // Input: position among the graph inputs
  Tensor constant;       // Constant: the value
  bool is_output = false;
  int64_t nbytes() const;
};

// A buffer seen through a view: what an extern call receives and what a graph output is. buffer -1 = None.
struct BufferView {
  int buffer = -1;
  Shape sizes, strides;
  int64_t offset = 0;
};

enum class ReduceOp : uint8_t { Sum, Prod, Max, Min, ArgMax, ArgMin, Any, All };
std::string_view reduce_op_name(ReduceOp op);

using Body = std::function<SExpr(const std::vector<Index>& idx, const std::vector<Index>& ridx)>;

struct LoopNode {
  enum class Kind : uint8_t { Pointwise, Reduction, Extern } kind = Kind::Pointwise;
  int buffer = -1;        // Pointwise/Reduction: the buffer it writes (contiguous over `sizes`)
  Shape sizes;            // Pointwise: the output shape; Reduction: the kept dims, in order
  Shape rsizes;           // Reduction: the reduced dims, in order
  ReduceOp reduce = ReduceOp::Sum;
  // Max over floats whose NaNs need not reach the result (lowering.cpp softmax_stabilising_max): codegen may
  // then use the host's one-instruction max, which skips NaN.
  bool nan_insensitive = false;
  Body body;              // Pointwise: body(idx, {}); Reduction: the value combined at (idx, ridx)
  // Reduction: maps the accumulator to the stored value (mean divides by the count); null = identity.
  std::function<SExpr(const SExpr& acc)> finalize;
  std::string origin;     // the graph values it computes (for logs and dumps)
  // Extern: a graph node run by its eager kernel; inputs and outputs are buffers.
  int graph_node = -1;
  std::vector<BufferView> extern_inputs;  // one per flat tensor argument (buffer -1 for None)
  std::vector<int> extern_outputs;        // buffers; -1 where the output aliases the mutated argument
  std::string reason;     // why it is an extern call
};

}  // namespace kiln::inductor
