// Short builders of scalar expressions (ir.h's s_* functions under arithmetic names) for the lowering rules.
#pragma once
#include "inductor/ir.h"

namespace kiln::inductor::pw {

inline SExpr c(double v, DType dt) { return s_const(v, dt); }
inline SExpr add(const SExpr& a, const SExpr& b) { return s_binary(SOp::Add, a, b); }
inline SExpr sub(const SExpr& a, const SExpr& b) { return s_binary(SOp::Sub, a, b); }
inline SExpr mul(const SExpr& a, const SExpr& b) { return s_binary(SOp::Mul, a, b); }
inline SExpr div(const SExpr& a, const SExpr& b) { return s_binary(SOp::Div, a, b); }
inline SExpr un(SOp op, const SExpr& a) { return s_unary(op, a); }
inline SExpr nonzero(const SExpr& x) { return x->dtype == DType::Bool ? x : s_binary(SOp::Ne, x, s_const(0, x->dtype)); }

// 1 / (1 + exp(-x))
inline SExpr sigmoid(const SExpr& x) { return div(c(1, x->dtype), add(c(1, x->dtype), un(SOp::Exp, un(SOp::Neg, x)))); }

}  // namespace kiln::inductor::pw
