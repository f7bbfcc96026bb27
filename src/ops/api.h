// The typed C++ API: one function per row of ops.def, each a thin call through the dispatcher (so autograd,
// meta tensors and capture see every call). Names follow PyTorch; `std_` because `std` is taken.
//
// Every call carries the caller's file:line into the dispatcher (OpCall::where) by one mechanism: each function
// takes a last parameter `CallSite where` defaulted to the call site, and each operator takes its tensor
// operand as a TensorOperand, which records the call site where the tensor converts. Users write calls as
// always (`relu(x)`, `x * 2.0`); capture names the line in graph nodes, breaks and logs (docs/capture.md).
#pragma once
#include <optional>
#include <source_location>
#include <string>

#include "ops/ivalue.h"

namespace kiln {

using OptScalar = std::optional<Scalar>;
using OptInt = std::optional<int64_t>;
using OptIntList = std::optional<IntList>;
using OptDType = std::optional<DType>;
using OptTensorList = std::vector<Tensor>;  // undefined entries mean None

// The caller's source line (the defaulted last parameter of every function below).
using CallSite = std::source_location;
// An operator's tensor operand with the call site of the expression (taken where the tensor converts).
struct TensorOperand {
  const Tensor& tensor;
  CallSite where;
  TensorOperand(const Tensor& t, CallSite w = CallSite::current()) : tensor(t), where(w) {}  // NOLINT: implicit by design
};

// unary pointwise
Tensor abs(const Tensor& x, CallSite where = CallSite::current());
Tensor neg(const Tensor& x, CallSite where = CallSite::current());
Tensor exp(const Tensor& x, CallSite where = CallSite::current());
Tensor exp2(const Tensor& x, CallSite where = CallSite::current());
Tensor log(const Tensor& x, CallSite where = CallSite::current());
Tensor log2(const Tensor& x, CallSite where = CallSite::current());
Tensor log1p(const Tensor& x, CallSite where = CallSite::current());
Tensor expm1(const Tensor& x, CallSite where = CallSite::current());
Tensor sqrt(const Tensor& x, CallSite where = CallSite::current());
Tensor rsqrt(const Tensor& x, CallSite where = CallSite::current());
Tensor sin(const Tensor& x, CallSite where = CallSite::current());
Tensor cos(const Tensor& x, CallSite where = CallSite::current());
Tensor tan(const Tensor& x, CallSite where = CallSite::current());
Tensor tanh(const Tensor& x, CallSite where = CallSite::current());
Tensor asin(const Tensor& x, CallSite where = CallSite::current());
Tensor acos(const Tensor& x, CallSite where = CallSite::current());
Tensor atan(const Tensor& x, CallSite where = CallSite::current());
Tensor sinh(const Tensor& x, CallSite where = CallSite::current());
Tensor cosh(const Tensor& x, CallSite where = CallSite::current());
Tensor sigmoid(const Tensor& x, CallSite where = CallSite::current());
Tensor relu(const Tensor& x, CallSite where = CallSite::current());
Tensor gelu(const Tensor& x, const std::string& approximate = "none", CallSite where = CallSite::current());
Tensor silu(const Tensor& x, CallSite where = CallSite::current());
Tensor erf(const Tensor& x, CallSite where = CallSite::current());
Tensor floor(const Tensor& x, CallSite where = CallSite::current());
Tensor ceil(const Tensor& x, CallSite where = CallSite::current());
Tensor round(const Tensor& x, int64_t decimals = 0, CallSite where = CallSite::current());
Tensor trunc(const Tensor& x, CallSite where = CallSite::current());
Tensor sign(const Tensor& x, CallSite where = CallSite::current());
Tensor reciprocal(const Tensor& x, CallSite where = CallSite::current());
Tensor logical_not(const Tensor& x, CallSite where = CallSite::current());
Tensor isnan(const Tensor& x, CallSite where = CallSite::current());
Tensor isinf(const Tensor& x, CallSite where = CallSite::current());

// binary pointwise (an IValue operand may be a Tensor or a number)
Tensor add(const IValue& a, const IValue& b, Scalar alpha = 1, CallSite where = CallSite::current());
Tensor sub(const IValue& a, const IValue& b, Scalar alpha = 1, CallSite where = CallSite::current());
Tensor mul(const IValue& a, const IValue& b, CallSite where = CallSite::current());
Tensor div(const IValue& a, const IValue& b, std::optional<std::string> rounding_mode = std::nullopt, CallSite where = CallSite::current());
Tensor remainder(const IValue& a, const IValue& b, CallSite where = CallSite::current());
Tensor pow(const IValue& a, const IValue& b, CallSite where = CallSite::current());
Tensor maximum(const Tensor& a, const Tensor& b, CallSite where = CallSite::current());
Tensor minimum(const Tensor& a, const Tensor& b, CallSite where = CallSite::current());
Tensor atan2(const Tensor& a, const Tensor& b, CallSite where = CallSite::current());
Tensor eq(const IValue& a, const IValue& b, CallSite where = CallSite::current());
Tensor ne(const IValue& a, const IValue& b, CallSite where = CallSite::current());
Tensor lt(const IValue& a, const IValue& b, CallSite where = CallSite::current());
Tensor le(const IValue& a, const IValue& b, CallSite where = CallSite::current());
Tensor gt(const IValue& a, const IValue& b, CallSite where = CallSite::current());
Tensor ge(const IValue& a, const IValue& b, CallSite where = CallSite::current());
Tensor logical_and(const Tensor& a, const Tensor& b, CallSite where = CallSite::current());
Tensor logical_or(const Tensor& a, const Tensor& b, CallSite where = CallSite::current());
Tensor logical_xor(const Tensor& a, const Tensor& b, CallSite where = CallSite::current());
Tensor bitwise_and(const IValue& a, const IValue& b, CallSite where = CallSite::current());
Tensor bitwise_or(const IValue& a, const IValue& b, CallSite where = CallSite::current());
Tensor bitwise_xor(const IValue& a, const IValue& b, CallSite where = CallSite::current());

// ternary
Tensor where(const Tensor& cond, const IValue& a, const IValue& b, CallSite where = CallSite::current());
Tensor clamp(const Tensor& x, OptScalar min, OptScalar max, CallSite where = CallSite::current());
Tensor lerp(const Tensor& x, const Tensor& end, const IValue& weight, CallSite where = CallSite::current());
Tensor addcmul(const Tensor& x, const Tensor& t1, const Tensor& t2, Scalar value = 1, CallSite where = CallSite::current());

// reductions (dim = nullopt reduces everything)
Tensor sum(const Tensor& x, OptIntList dim = std::nullopt, bool keepdim = false, OptDType dtype = std::nullopt, CallSite where = CallSite::current());
Tensor mean(const Tensor& x, OptIntList dim = std::nullopt, bool keepdim = false, OptDType dtype = std::nullopt, CallSite where = CallSite::current());
Tensor prod(const Tensor& x, OptInt dim = std::nullopt, bool keepdim = false, OptDType dtype = std::nullopt, CallSite where = CallSite::current());
Tensor amax(const Tensor& x, IntList dim = {}, bool keepdim = false, CallSite where = CallSite::current());
Tensor amin(const Tensor& x, IntList dim = {}, bool keepdim = false, CallSite where = CallSite::current());
Tensor argmax(const Tensor& x, OptInt dim = std::nullopt, bool keepdim = false, CallSite where = CallSite::current());
Tensor argmin(const Tensor& x, OptInt dim = std::nullopt, bool keepdim = false, CallSite where = CallSite::current());
Tensor var(const Tensor& x, OptIntList dim = std::nullopt, OptScalar correction = std::nullopt, bool keepdim = false, CallSite where = CallSite::current());
Tensor std_(const Tensor& x, OptIntList dim = std::nullopt, OptScalar correction = std::nullopt, bool keepdim = false, CallSite where = CallSite::current());
Tensor logsumexp(const Tensor& x, IntList dim, bool keepdim = false, CallSite where = CallSite::current());
Tensor any(const Tensor& x, OptIntList dim = std::nullopt, bool keepdim = false, CallSite where = CallSite::current());
Tensor all(const Tensor& x, OptIntList dim = std::nullopt, bool keepdim = false, CallSite where = CallSite::current());

// scans and sorts
Tensor cumsum(const Tensor& x, int64_t dim, OptDType dtype = std::nullopt, CallSite where = CallSite::current());
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, CallSite where = CallSite::current());

// matrix products
Tensor mm(const Tensor& a, const Tensor& b, CallSite where = CallSite::current());
Tensor bmm(const Tensor& a, const Tensor& b, CallSite where = CallSite::current());
Tensor addmm(const Tensor& self, const Tensor& m1, const Tensor& m2, Scalar beta = 1, Scalar alpha = 1, CallSite where = CallSite::current());
Tensor matmul(const Tensor& a, const Tensor& b, CallSite where = CallSite::current());
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias = {}, CallSite where = CallSite::current());

// views
Tensor view(const Tensor& x, IntList size, CallSite where = CallSite::current());
Tensor reshape(const Tensor& x, IntList shape, CallSite where = CallSite::current());
Tensor permute(const Tensor& x, IntList dims, CallSite where = CallSite::current());
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1, CallSite where = CallSite::current());
Tensor expand(const Tensor& x, IntList size, CallSite where = CallSite::current());
Tensor slice(const Tensor& x, int64_t dim = 0, OptInt start = std::nullopt, OptInt end = std::nullopt, int64_t step = 1, CallSite where = CallSite::current());
Tensor select(const Tensor& x, int64_t dim, int64_t index, CallSite where = CallSite::current());
Tensor squeeze(const Tensor& x, OptIntList dim = std::nullopt, CallSite where = CallSite::current());
Tensor unsqueeze(const Tensor& x, int64_t dim, CallSite where = CallSite::current());
Tensor as_strided(const Tensor& x, IntList size, IntList stride, OptInt storage_offset = std::nullopt, CallSite where = CallSite::current());
Tensor diagonal(const Tensor& x, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1, CallSite where = CallSite::current());
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length, CallSite where = CallSite::current());
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1, CallSite where = CallSite::current());
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0, CallSite where = CallSite::current());
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0, CallSite where = CallSite::current());

// copies
Tensor contiguous(const Tensor& x, CallSite where = CallSite::current());
Tensor clone(const Tensor& x, CallSite where = CallSite::current());
Tensor to(const Tensor& x, DType dtype, CallSite where = CallSite::current());

// data movement
Tensor cat(const TensorList& xs, int64_t dim = 0, CallSite where = CallSite::current());
Tensor stack(const TensorList& xs, int64_t dim = 0, CallSite where = CallSite::current());
Tensor repeat(const Tensor& x, IntList repeats, CallSite where = CallSite::current());
Tensor flip(const Tensor& x, IntList dims, CallSite where = CallSite::current());
Tensor roll(const Tensor& x, IntList shifts, IntList dims = {}, CallSite where = CallSite::current());
Tensor tril(const Tensor& x, int64_t diagonal = 0, CallSite where = CallSite::current());
Tensor triu(const Tensor& x, int64_t diagonal = 0, CallSite where = CallSite::current());
Tensor pad(const Tensor& x, IntList pad, const std::string& mode = "constant", std::optional<double> value = std::nullopt, CallSite where = CallSite::current());
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index, CallSite where = CallSite::current());
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index, CallSite where = CallSite::current());
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const IValue& src, CallSite where = CallSite::current());
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, CallSite where = CallSite::current());
Tensor index(const Tensor& x, const OptTensorList& indices, CallSite where = CallSite::current());
Tensor index_put(const Tensor& x, const OptTensorList& indices, const IValue& values, bool accumulate = false, CallSite where = CallSite::current());
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1, CallSite where = CallSite::current());

// creation
Tensor full(IntList size, Scalar fill, OptDType dtype = std::nullopt, CallSite where = CallSite::current());
Tensor zeros(IntList size, OptDType dtype = std::nullopt, CallSite where = CallSite::current());
Tensor ones(IntList size, OptDType dtype = std::nullopt, CallSite where = CallSite::current());
Tensor arange(Scalar start, Scalar end, Scalar step = 1, OptDType dtype = std::nullopt, CallSite where = CallSite::current());
Tensor linspace(Scalar start, Scalar end, int64_t steps, OptDType dtype = std::nullopt, CallSite where = CallSite::current());
Tensor eye(int64_t n, OptInt m = std::nullopt, OptDType dtype = std::nullopt, CallSite where = CallSite::current());
Tensor full_like(const Tensor& x, Scalar fill, OptDType dtype = std::nullopt, CallSite where = CallSite::current());
Tensor zeros_like(const Tensor& x, OptDType dtype = std::nullopt, CallSite where = CallSite::current());
Tensor ones_like(const Tensor& x, OptDType dtype = std::nullopt, CallSite where = CallSite::current());

// random
Tensor rand(IntList size, OptDType dtype = std::nullopt, CallSite where = CallSite::current());
Tensor randn(IntList size, OptDType dtype = std::nullopt, CallSite where = CallSite::current());
Tensor randint(int64_t low, int64_t high, IntList size, OptDType dtype = std::nullopt, CallSite where = CallSite::current());
Tensor bernoulli(const Tensor& x, std::optional<double> p = std::nullopt, CallSite where = CallSite::current());
Tensor rand_like(const Tensor& x, OptDType dtype = std::nullopt, CallSite where = CallSite::current());
Tensor randn_like(const Tensor& x, OptDType dtype = std::nullopt, CallSite where = CallSite::current());

// nn
Tensor softmax(const Tensor& x, int64_t dim, OptDType dtype = std::nullopt, CallSite where = CallSite::current());
Tensor log_softmax(const Tensor& x, int64_t dim, OptDType dtype = std::nullopt, CallSite where = CallSite::current());
Tensor layer_norm(const Tensor& x, IntList normalized_shape, const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5, CallSite where = CallSite::current());
Tensor rms_norm(const Tensor& x, IntList normalized_shape, const Tensor& weight = {}, std::optional<double> eps = std::nullopt, CallSite where = CallSite::current());
Tensor dropout(const Tensor& x, double p, bool train, CallSite where = CallSite::current());
Tensor mse_loss(const Tensor& x, const Tensor& target, int64_t reduction = 1, CallSite where = CallSite::current());
Tensor nll_loss(const Tensor& x, const Tensor& target, const Tensor& weight = {}, int64_t reduction = 1, int64_t ignore_index = -100, CallSite where = CallSite::current());
Tensor cross_entropy(const Tensor& x, const Tensor& target, const Tensor& weight = {}, int64_t reduction = 1,
                     int64_t ignore_index = -100, double label_smoothing = 0.0, CallSite where = CallSite::current());
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum = 0.1, double eps = 1e-5, CallSite where = CallSite::current());
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias = {}, IntList stride = {1, 1},
              IntList padding = {0, 0}, IntList dilation = {1, 1}, int64_t groups = 1, CallSite where = CallSite::current());
Tensor max_pool2d(const Tensor& x, IntList kernel_size, IntList stride = {}, IntList padding = {0, 0},
                  IntList dilation = {1, 1}, bool ceil_mode = false, CallSite where = CallSite::current());
Tensor convolution(const Tensor& x, const Tensor& w, const Tensor& bias, IntList stride, IntList padding, IntList dilation,
                   bool transposed, IntList output_padding, int64_t groups, CallSite where = CallSite::current());
Tensor upsample_nearest2d(const Tensor& x, IntList output_size, std::optional<double> scales_h = std::nullopt,
                          std::optional<double> scales_w = std::nullopt, CallSite where = CallSite::current());
Tensor upsample_bilinear2d(const Tensor& x, IntList output_size, bool align_corners,
                           std::optional<double> scales_h = std::nullopt, std::optional<double> scales_w = std::nullopt,
                           CallSite where = CallSite::current());
Tensor avg_pool2d(const Tensor& x, IntList kernel_size, IntList stride = {}, IntList padding = {0, 0},
                  bool ceil_mode = false, bool count_include_pad = true, OptInt divisor_override = std::nullopt, CallSite where = CallSite::current());

// backward helpers of conv2d and the pools (first-order only; their VJPs call them)
Tensor conv2d_backward_input(const Tensor& grad_output, const Tensor& weight, IntList input_size, IntList stride,
                             IntList padding, IntList dilation, int64_t groups, CallSite where = CallSite::current());
Tensor conv2d_backward_weight(const Tensor& grad_output, const Tensor& input, IntList weight_size, IntList stride,
                              IntList padding, IntList dilation, int64_t groups, CallSite where = CallSite::current());
Tensor max_pool2d_backward(const Tensor& grad_output, const Tensor& x, IntList kernel_size, IntList stride,
                           IntList padding, IntList dilation, bool ceil_mode, CallSite where = CallSite::current());
Tensor avg_pool2d_backward(const Tensor& grad_output, const Tensor& x, IntList kernel_size, IntList stride,
                           IntList padding, bool ceil_mode, bool count_include_pad, OptInt divisor_override, CallSite where = CallSite::current());

// in-place (return their first argument)
Tensor add_(const Tensor& self, const IValue& other, Scalar alpha = 1, CallSite where = CallSite::current());
Tensor mul_(const Tensor& self, const IValue& other, CallSite where = CallSite::current());
Tensor copy_(const Tensor& self, const Tensor& src, CallSite where = CallSite::current());
Tensor fill_(const Tensor& self, Scalar value, CallSite where = CallSite::current());
Tensor zero_(const Tensor& self, CallSite where = CallSite::current());

// Reduces a broadcast gradient back to `shape` (sums the broadcast dims). Used by VJPs.
Tensor sum_to(const Tensor& grad, const Shape& shape);

// operators
Tensor operator+(TensorOperand a, const Tensor& b);
Tensor operator-(TensorOperand a, const Tensor& b);
Tensor operator*(TensorOperand a, const Tensor& b);
Tensor operator/(TensorOperand a, const Tensor& b);
Tensor operator+(TensorOperand a, Scalar b);
Tensor operator-(TensorOperand a, Scalar b);
Tensor operator*(TensorOperand a, Scalar b);
Tensor operator/(TensorOperand a, Scalar b);
Tensor operator+(Scalar a, TensorOperand b);
Tensor operator-(Scalar a, TensorOperand b);
Tensor operator*(Scalar a, TensorOperand b);
Tensor operator/(Scalar a, TensorOperand b);
Tensor operator-(TensorOperand a);

}  // namespace kiln
