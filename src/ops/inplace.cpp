// In-place ops: add_, mul_, copy_, fill_, zero_. Each writes into its first argument and returns it. The
// result keeps self's dtype (PyTorch refuses a write that would need a wider one). The dispatcher bumps the
// storage version and, under autograd, records history through run_inplace_recorded.
#include <cmath>

#include "eager/loops.h"
#include "ops/common.h"
#include "ops/families.h"

namespace kiln {
namespace {

// Writes `value` (broadcast to self's shape) into self, checking that the result dtype can be stored.
void write_result(const OpCall& c, const Tensor& self, const Tensor& value) {
  KILN_CHECK(can_cast_to(value.dtype(), self.dtype()),
             "{}: result type {} cannot be cast to the in-place output {} (would lose the floating/integer part)",
             c.name(), dtype_name(value.dtype()), self.str());
  Shape b = broadcast_shapes(self.sizes(), value.sizes(), c.name());
  KILN_CHECK(b == self.sizes(), "{}: the result shape {} differs from the in-place output {} (an in-place op "
             "cannot grow its output by broadcasting)", c.name(), shape_str(b), self.str());
  copy_into(self, value);
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
  Shape b = broadcast_shapes(self.sizes(), src.sizes(), "copy_");
  KILN_CHECK(b == self.sizes(), "copy_: source {} cannot be broadcast to the destination {}", src.str(), self.str());
  copy_into(self, src);
  return {self};
}
std::vector<Tensor> copy__vjp(const VjpCall& v) {
  const Tensor& src = v.call.tensor(1);
  return {Tensor(), if_needed(v.needs(1), [&] { return to(sum_to(v.grads[0], src.sizes()), src.dtype()); })};
}

std::vector<Tensor> fill__kernel(const OpCall& c) {
  const Tensor& self = c.tensor(0);
  check_fits(c.scalar(1), self.dtype(), "fill_");
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
  def(OpId::add_).infer(self_meta).kernel(add__kernel).vjp(add__vjp);
  def(OpId::mul_).infer(self_meta).kernel(mul__kernel).vjp(mul__vjp);
  def(OpId::copy_).infer(self_meta).kernel(copy__kernel).vjp(copy__vjp);
  def(OpId::fill_).infer(self_meta).kernel(fill__kernel).vjp(overwrite_vjp);
  def(OpId::zero_).infer(self_meta).kernel(zero__kernel).vjp(overwrite_vjp);
}

}  // namespace kiln
