// The pointwise rules of the lowering table (lowerings.def): each op's result as a scalar expression of its
// operands, with the eager kernels' dtype rules (floating math on integers computes in f32, f16/bf16 in f32;
// integer division, remainder and powers call runtime helpers with eager's exact semantics). lowering.cpp
// gathers the operands, applies the rule, rounds the result to its dtype and decides realise or inline.
#include <cmath>
#include <optional>

#include "eager/tensor.h"
#include "inductor/lowering_exprs.h"
#include "inductor/lowering_table.h"
#include "ops/api.h"

namespace kiln::inductor {

using namespace pw;

namespace {

bool is_unsigned_int(DType dt) { return dt == DType::U8; }

PointwiseBody lowered(ScalarFn fn) { return PointwiseBody{Decision::yes(), std::move(fn)}; }

// A unary op computing in the result's compute dtype (ints become f32 for float-valued ops, as in eager).
PointwiseBody unary(const PointwiseCall& call, std::function<SExpr(const SExpr&)> g) {
  return lowered([g, cdt = call.cdt](const std::vector<SExpr>& x) { return g(s_cast(x[0], cdt)); });
}
PointwiseBody unary_op(const PointwiseCall& call, SOp op) {
  return unary(call, [op](const SExpr& x) { return un(op, x); });
}

// A binary op computing in `in_dt`.
PointwiseBody binary(DType in_dt, std::function<SExpr(const SExpr&, const SExpr&)> g) {
  return lowered([g, in_dt](const std::vector<SExpr>& x) { return g(s_cast(x[0], in_dt), s_cast(x[1], in_dt)); });
}
PointwiseBody binary_op(DType in_dt, SOp op) {
  return binary(in_dt, [op](const SExpr& x, const SExpr& y) { return s_binary(op, x, y); });
}

}  // namespace

// ---- unary float math: one scalar op each
PointwiseBody pw_exp(const PointwiseCall& c) { return unary_op(c, SOp::Exp); }
PointwiseBody pw_exp2(const PointwiseCall& c) { return unary_op(c, SOp::Exp2); }
PointwiseBody pw_log(const PointwiseCall& c) { return unary_op(c, SOp::Log); }
PointwiseBody pw_log2(const PointwiseCall& c) { return unary_op(c, SOp::Log2); }
PointwiseBody pw_log1p(const PointwiseCall& c) { return unary_op(c, SOp::Log1p); }
PointwiseBody pw_expm1(const PointwiseCall& c) { return unary_op(c, SOp::Expm1); }
PointwiseBody pw_sqrt(const PointwiseCall& c) { return unary_op(c, SOp::Sqrt); }
PointwiseBody pw_sin(const PointwiseCall& c) { return unary_op(c, SOp::Sin); }
PointwiseBody pw_cos(const PointwiseCall& c) { return unary_op(c, SOp::Cos); }
PointwiseBody pw_tan(const PointwiseCall& c) { return unary_op(c, SOp::Tan); }
PointwiseBody pw_tanh(const PointwiseCall& c) { return unary_op(c, SOp::Tanh); }
PointwiseBody pw_asin(const PointwiseCall& c) { return unary_op(c, SOp::Asin); }
PointwiseBody pw_acos(const PointwiseCall& c) { return unary_op(c, SOp::Acos); }
PointwiseBody pw_atan(const PointwiseCall& c) { return unary_op(c, SOp::Atan); }
PointwiseBody pw_sinh(const PointwiseCall& c) { return unary_op(c, SOp::Sinh); }
PointwiseBody pw_cosh(const PointwiseCall& c) { return unary_op(c, SOp::Cosh); }
PointwiseBody pw_erf(const PointwiseCall& c) { return unary_op(c, SOp::Erf); }
PointwiseBody pw_neg(const PointwiseCall& c) { return unary_op(c, SOp::Neg); }

// ---- unary ops built from several
PointwiseBody pw_rsqrt(const PointwiseCall& c) {  // 1 / sqrt(x), rounded twice as eager
  return unary(c, [](const SExpr& x) { return div(pw::c(1, x->dtype), un(SOp::Sqrt, x)); });
}
PointwiseBody pw_reciprocal(const PointwiseCall& c) {
  return unary(c, [](const SExpr& x) { return div(pw::c(1, x->dtype), x); });
}
PointwiseBody pw_sigmoid(const PointwiseCall& c) { return unary(c, [](const SExpr& x) { return sigmoid(x); }); }
PointwiseBody pw_silu(const PointwiseCall& c) {  // x / (1 + exp(-x))
  return unary(c, [](const SExpr& x) { return div(x, add(pw::c(1, x->dtype), un(SOp::Exp, un(SOp::Neg, x)))); });
}
// gelu is its formula for every dtype (docs/inductor.md, special values): x/2 (1 + erf(x/sqrt 2)), or with
// approximate="tanh" x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
PointwiseBody pw_gelu(const PointwiseCall& c) {
  if (c.mc.str(1) == "tanh") {
    return unary(c, [](const SExpr& x) {
      DType d = x->dtype;
      SExpr inner = mul(pw::c(0.797884560802865355880, d), add(x, mul(pw::c(0.044715, d), mul(mul(x, x), x))));
      return mul(mul(pw::c(0.5, d), x), add(pw::c(1, d), un(SOp::Tanh, inner)));
    });
  }
  return unary(c, [](const SExpr& x) {
    DType d = x->dtype;
    return mul(mul(x, pw::c(0.5, d)), add(pw::c(1, d), un(SOp::Erf, mul(x, pw::c(M_SQRT1_2, d)))));
  });
}
PointwiseBody pw_abs(const PointwiseCall& c) {
  return unary(c, [](const SExpr& x) { return is_unsigned_int(x->dtype) ? x : un(SOp::Abs, x); });
}
PointwiseBody pw_relu(const PointwiseCall& c) {
  return unary(c, [](const SExpr& x) {
    if (is_unsigned_int(x->dtype)) return x;
    return s_where(s_binary(SOp::Lt, x, pw::c(0, x->dtype)), pw::c(0, x->dtype), x);
  });
}
PointwiseBody pw_sign(const PointwiseCall& c) {
  return unary(c, [](const SExpr& x) {
    DType d = x->dtype;
    if (d == DType::Bool) return x;
    if (is_unsigned_int(d)) return s_cast(nonzero(x), d);
    return sub(s_cast(s_binary(SOp::Lt, pw::c(0, d), x), d), s_cast(s_binary(SOp::Lt, x, pw::c(0, d)), d));
  });
}
// floor, ceil, trunc, round (round with `decimals`: scaled by 10^|decimals| around the rounding).
PointwiseBody pw_rounding(const PointwiseCall& c) {
  const OpId id = c.id;
  SOp rop = id == OpId::floor ? SOp::Floor : id == OpId::ceil ? SOp::Ceil : id == OpId::trunc ? SOp::Trunc : SOp::RoundEven;
  int64_t decimals = id == OpId::round ? c.mc.int_(1) : 0;
  return unary(c, [rop, decimals](const SExpr& x) {
    if (!is_floating(x->dtype)) return x;
    if (decimals == 0) return un(rop, x);
    double scale = std::pow(10.0, double(decimals < 0 ? -decimals : decimals));
    SExpr k = pw::c(scale, x->dtype);
    return decimals < 0 ? mul(un(rop, div(x, k)), k) : div(un(rop, mul(x, k)), k);
  });
}
PointwiseBody pw_logical_not(const PointwiseCall&) {
  return lowered([](const std::vector<SExpr>& x) { return un(SOp::Not, nonzero(x[0])); });
}
PointwiseBody pw_isnan(const PointwiseCall&) {
  return lowered([](const std::vector<SExpr>& x) { return is_floating(x[0]->dtype) ? un(SOp::IsNan, x[0]) : s_iconst(0, DType::Bool); });
}
PointwiseBody pw_isinf(const PointwiseCall&) {
  return lowered([](const std::vector<SExpr>& x) { return is_floating(x[0]->dtype) ? un(SOp::IsInf, x[0]) : s_iconst(0, DType::Bool); });
}

// ---- binary arithmetic
// x + alpha * y (sub: alpha negated); a float alpha other than +-1 rounds once, as a fused multiply-add.
PointwiseBody pw_add_sub(const PointwiseCall& c) {
  Scalar alpha = c.mc.scalar(2);
  bool subtract = c.id == OpId::sub;
  double ad = subtract ? -alpha.to_double() : alpha.to_double();
  int64_t ai = subtract ? -alpha.to_int() : alpha.to_int();
  return binary(c.common, [ad, ai](const SExpr& x, const SExpr& y) {
    DType d = x->dtype;
    if (d == DType::Bool) return ad == 1.0 ? s_binary(SOp::Or, x, y) : s_binary(SOp::Or, x, s_binary(SOp::And, y, s_iconst(ai != 0, d)));
    if (ad == 1.0) return add(x, y);
    if (ad == -1.0) return sub(x, y);
    if (is_floating(d)) return s_mul_add(pw::c(ad, d), y, x);  // rounded once, as eager and PyTorch
    return add(x, mul(s_iconst(ai, d), y));
  });
}
PointwiseBody pw_mul(const PointwiseCall& c) {
  return binary(c.common, [](const SExpr& x, const SExpr& y) { return x->dtype == DType::Bool ? s_binary(SOp::And, x, y) : mul(x, y); });
}
// div: true division; rounding_mode "trunc" or "floor" (floats: trunc of the quotient, or the exact floor
// helper; integers: helpers with eager's semantics).
PointwiseBody pw_div(const PointwiseCall& c) {
  std::optional<std::string> mode = c.mc.opt_str(2);
  if (!mode) return binary(c.cdt, [](const SExpr& x, const SExpr& y) { return div(x, y); });
  if (is_floating(c.cdt)) {
    bool floor_mode = *mode == "floor";
    return binary(c.cdt, [floor_mode](const SExpr& x, const SExpr& y) {
      if (floor_mode) return s_helper(x->dtype == DType::F64 ? "kiln_rt_div_floor_f64" : "kiln_rt_div_floor_f32", x->dtype, {x, y});
      return un(SOp::Trunc, div(x, y));
    });
  }
  std::string helper = *mode == "floor" ? "kiln_rt_idiv_floor" : "kiln_rt_idiv_trunc";
  return binary(c.cdt, [helper](const SExpr& x, const SExpr& y) {
    if (x->dtype == DType::Bool) return x;
    return s_cast(s_helper(helper, DType::I64, {s_cast(x, DType::I64), s_cast(y, DType::I64)}), x->dtype);
  });
}
PointwiseBody pw_remainder(const PointwiseCall& c) {
  return binary(c.cdt, [](const SExpr& x, const SExpr& y) {
    DType d = x->dtype;
    if (is_floating(d)) return s_helper(d == DType::F64 ? "kiln_rt_remainder_f64" : "kiln_rt_remainder_f32", d, {x, y});
    return s_cast(s_helper("kiln_rt_iremainder", DType::I64, {s_cast(x, DType::I64), s_cast(y, DType::I64)}), d);
  });
}
PointwiseBody pw_pow(const PointwiseCall& c) {
  if (c.mc.tensor(1).is_wrapped_number() || c.mc.tensor(0).is_wrapped_number())
    return {Decision::no("pow with a number operand has eager special cases (exponent 0, 1, 1/2, 2, ...) that are not "
                         "lowered"), {}};
  return binary(c.cdt, [](const SExpr& x, const SExpr& y) {
    if (is_floating(x->dtype)) return s_binary(SOp::Pow, x, y);
    if (x->dtype == DType::Bool) return x;
    return s_cast(s_helper("kiln_rt_ipow", DType::I64, {s_cast(x, DType::I64), s_cast(y, DType::I64)}), x->dtype);
  });
}
PointwiseBody pw_maximum_minimum(const PointwiseCall& c) {
  bool is_max = c.id == OpId::maximum;
  return binary(c.cdt, [is_max](const SExpr& x, const SExpr& y) {
    if (x->dtype == DType::Bool) return s_binary(is_max ? SOp::Or : SOp::And, x, y);
    if (is_floating(x->dtype)) return s_binary(is_max ? SOp::Max : SOp::Min, x, y);
    return is_max ? s_where(s_binary(SOp::Lt, x, y), y, x) : s_where(s_binary(SOp::Lt, y, x), y, x);
  });
}
PointwiseBody pw_atan2(const PointwiseCall& c) { return binary_op(c.cdt, SOp::Atan2); }

// ---- comparisons and logic
PointwiseBody pw_compare(const PointwiseCall& c) {
  const OpId id = c.id;
  SOp cmp = id == OpId::eq ? SOp::Eq : id == OpId::ne ? SOp::Ne : id == OpId::lt ? SOp::Lt
            : id == OpId::le ? SOp::Le : id == OpId::gt ? SOp::Gt : SOp::Ge;
  return binary_op(c.common, cmp);
}
PointwiseBody pw_logical(const PointwiseCall& c) {
  SOp lop = c.id == OpId::logical_and ? SOp::And : c.id == OpId::logical_or ? SOp::Or : SOp::Xor;
  return lowered([lop](const std::vector<SExpr>& x) { return s_binary(lop, nonzero(x[0]), nonzero(x[1])); });
}
PointwiseBody pw_bitwise(const PointwiseCall& c) {
  SOp bop = c.id == OpId::bitwise_and ? SOp::And : c.id == OpId::bitwise_or ? SOp::Or : SOp::Xor;
  return binary_op(c.cdt, bop);
}

// ---- selection and conversion
PointwiseBody pw_where(const PointwiseCall& c) {
  return lowered([cdt = c.cdt](const std::vector<SExpr>& x) { return s_where(nonzero(x[0]), s_cast(x[1], cdt), s_cast(x[2], cdt)); });
}
// Bounds as the dtype sees them (f16/bf16 round them to their own precision first, as eager does); a NaN bound
// with both bounds given makes every element NaN.
PointwiseBody pw_clamp(const PointwiseCall& c) {
  std::optional<Scalar> lo = c.mc.opt_scalar(1), hi = c.mc.opt_scalar(2);
  const DType cdt = c.cdt, out_dt = c.out_dt;
  auto bound = [&](const Scalar& s) {
    if (!is_floating(cdt)) return s_iconst(s.to_int(), cdt);
    Tensor t = to(Tensor::scalar(s, DType::F64), out_dt);
    return s_const(t.item().to_double(), cdt);
  };
  std::optional<SExpr> lo_e, hi_e;
  if (lo) lo_e = bound(*lo);
  if (hi) hi_e = bound(*hi);
  bool nan_bound = (lo && std::isnan(lo->to_double())) || (hi && std::isnan(hi->to_double()));
  if (nan_bound && lo && hi) return lowered([cdt](const std::vector<SExpr>&) { return s_const(NAN, cdt); });
  return lowered([cdt, lo_e, hi_e](const std::vector<SExpr>& x) {
    SExpr r = s_cast(x[0], cdt);
    if (lo_e) r = s_where(s_binary(SOp::Lt, r, *lo_e), *lo_e, r);
    if (hi_e) r = s_where(s_binary(SOp::Gt, r, *hi_e), *hi_e, r);
    return r;
  });
}
PointwiseBody pw_to(const PointwiseCall& c) {
  return lowered([cdt = c.cdt](const std::vector<SExpr>& x) { return s_cast(x[0], cdt); });
}

}  // namespace kiln::inductor
