// In-place ops: add_, mul_, copy_, fill_, zero_. Each writes into its first argument and returns it. The
// result keeps self's dtype (PyTorch refuses a write that would need a wider one). The dispatcher bumps the
// storage version and, under autograd, records history through run_inplace_recorded.
#include <cmath>

#include "eager/loops.h"
#include "ops/common.h"
#include "ops/families.h"
#include "ops/storage_checks.h"

namespace kiln {
namespace {

// The in-place contract: the functional op's result (dtype `dt`, shape `sizes`) must be storable in self: a
// dtype that casts to self's and a shape that broadcasts to exactly self's. Inference and the kernels both
// check it here, so `kiln verify` refuses every in-place call `kiln run` would.
void check_inplace_result(const OpCall& c, const TensorMeta& self, DType dt, const Shape& sizes) {
  check_no_internal_overlap(c.name(), self.sizes, self.strides);
  KILN_CHECK(can_cast_to(dt, self.dtype),
             "{}: result type {} cannot be cast to the in-place output {}{} (would lose the floating/integer part)",
             c.name(), dtype_name(dt), dtype_name(self.dtype), shape_str(self.sizes));
  Shape b = broadcast_shapes(self.sizes, sizes, c.name());
  KILN_CHECK(b == self.sizes, "{}: the result shape {} differs from the in-place output {}{} (an in-place op "
             "cannot grow its output by broadcasting)", c.name(), shape_str(b), dtype_name(self.dtype),
             shape_str(self.sizes));
}

// Writes `value` (broadcast to self's shape) into self.
void write_result(const OpCall& c, const Tensor& self, const Tensor& value) {
  check_inplace_result(c, self.meta(), value.dtype(), value.sizes());
  copy_into(self, value);
}

// The inference of an in-place op whose functional twin `Functional` takes the same arguments (add_: add):
// the twin's checks and result, then the in-place contract.
template <OpId Functional>
std::vector<TensorMeta> infer_inplace(const OpCall& c) {
  const TensorMeta result = op_info(Functional).infer(c).at(0);
  check_inplace_result(c, c.tensor(0).meta(), result.dtype, result.sizes);
  return {c.tensor(0).meta()};
}

std::vector<TensorMeta> infer_copy_(const OpCall& c) {  // the source broadcasts to the destination
  check_inplace_result(c, c.tensor(0).meta(), c.tensor(0).dtype(), c.tensor(1).sizes());
  return {c.tensor(0).meta()};
}

std::vector<TensorMeta> infer_fill_(const OpCall& c) {  // the value fits the destination's dtype
  check_fits(c.scalar(1), c.tensor(0).dtype(), "fill_");
  return {c.tensor(0).meta()};
}

std::vector<Tensor> add__kernel(const OpCall& c) {
  const Tensor& self = c.tensor(0);
  write_result(c, self, add(self, c.tensor(1), c.scalar(2)));
  return {self};
}
std::vector<Tensor> add__vjp(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  return {if_needed(v.needs(0), [&] { return g; }),
          if_needed(v.needs(1), [&] { return sum_to(mul(g, v.call.scalar(2)), v.call.tensor(1).sizes()); })};
}

std::vector<Tensor> mul__kernel(const OpCall& c) {
  const Tensor& self = c.tensor(0);
  write_result(c, self, mul(self, c.tensor(1)));
  return {self};
}
std::vector<Tensor> mul__vjp(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  const Tensor &a = v.call.tensor(0), &b = v.call.tensor(1);  // a: self before the write
  return {if_needed(v.needs(0), [&] { return sum_to(mul(g, b), a.sizes()); }),
          if_needed(v.needs(1), [&] { return sum_to(mul(g, a), b.sizes()); })};
}

std::vector<Tensor> copy__kernel(const OpCall& c) {
  const Tensor& self = c.tensor(0);
  const Tensor& src = c.tensor(1);
  infer_copy_(c);
  copy_into(self, src);
  return {self};
}
std::vector<Tensor> copy__vjp(const VjpCall& v) {
  const Tensor& src = v.call.tensor(1);
  return {Tensor(), if_needed(v.needs(1), [&] { return to(sum_to(v.grads[0], src.sizes()), src.dtype()); })};
}

std::vector<Tensor> fill__kernel(const OpCall& c) {
  const Tensor& self = c.tensor(0);
  infer_fill_(c);
  copy_into(self, Tensor::scalar(c.scalar(1), self.dtype()));
  return {self};
}
std::vector<Tensor> zero__kernel(const OpCall& c) {
  const Tensor& self = c.tensor(0);
  copy_into(self, Tensor::scalar(0, self.dtype()));
  return {self};
}
std::vector<Tensor> overwrite_vjp(const VjpCall&) { return {Tensor()}; }

std::vector<TensorMeta> self_meta(const OpCall& c) { return {c.tensor(0).meta()}; }

}  // namespace

bool can_cast_to(DType from, DType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  if (from != DType::Bool && to == DType::Bool) return false;
  return true;
}

void register_inplace_ops() {
  def(OpId::add_).infer(infer_inplace<OpId::add>).kernel(add__kernel).vjp(add__vjp);
  def(OpId::mul_).infer(infer_inplace<OpId::mul>).kernel(mul__kernel).vjp(mul__vjp);
  def(OpId::copy_).infer(infer_copy_).kernel(copy__kernel).vjp(copy__vjp);
  def(OpId::fill_).infer(infer_fill_).kernel(fill__kernel).vjp(overwrite_vjp);
  def(OpId::zero_).infer(self_meta).kernel(zero__kernel).vjp(overwrite_vjp);
}

}  // namespace kiln
