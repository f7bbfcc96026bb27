// The typed C++ API: one function per row of ops.def, each a thin call through the dispatcher (so autograd,
// meta tensors and, later, capture see every call). Names follow PyTorch; `std_` because `std` is taken.
#pragma once
#include <optional>
#include <string>

#include "ops/ivalue.h"

namespace kiln {

using OptScalar = std::optional<Scalar>;
using OptInt = std::optional<int64_t>;
using OptIntList = std::optional<IntList>;
using OptDType = std::optional<DType>;
using OptTensorList = std::vector<Tensor>;  // undefined entries mean None

// unary pointwise
Tensor abs(const Tensor& x);
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor exp2(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor silu(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x, int64_t decimals = 0);
Tensor trunc(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor logical_not(const Tensor& x);
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);

// binary pointwise (an IValue operand may be a Tensor or a number)
Tensor add(const IValue& a, const IValue& b, Scalar alpha = 1);
Tensor sub(const IValue& a, const IValue& b, Scalar alpha = 1);
Tensor mul(const IValue& a, const IValue& b);
Tensor div(const IValue& a, const IValue& b, std::optional<std::string> rounding_mode = std::nullopt);
Tensor remainder(const IValue& a, const IValue& b);
Tensor pow(const IValue& a, const IValue& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor atan2(const Tensor& a, const Tensor& b);
Tensor eq(const IValue& a, const IValue& b);
Tensor ne(const IValue& a, const IValue& b);
Tensor lt(const IValue& a, const IValue& b);
Tensor le(const IValue& a, const IValue& b);
Tensor gt(const IValue& a, const IValue& b);
Tensor ge(const IValue& a, const IValue& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor bitwise_and(const IValue& a, const IValue& b);
Tensor bitwise_or(const IValue& a, const IValue& b);
Tensor bitwise_xor(const IValue& a, const IValue& b);

// ternary
Tensor where(const Tensor& cond, const IValue& a, const IValue& b);
Tensor clamp(const Tensor& x, OptScalar min, OptScalar max);
Tensor lerp(const Tensor& x, const Tensor& end, const IValue& weight);
Tensor addcmul(const Tensor& x, const Tensor& t1, const Tensor& t2, Scalar value = 1);

// reductions (dim = nullopt reduces everything)
Tensor sum(const Tensor& x, OptIntList dim = std::nullopt, bool keepdim = false, OptDType dtype = std::nullopt);
Tensor mean(const Tensor& x, OptIntList dim = std::nullopt, bool keepdim = false, OptDType dtype = std::nullopt);
Tensor prod(const Tensor& x, OptInt dim = std::nullopt, bool keepdim = false, OptDType dtype = std::nullopt);
Tensor amax(const Tensor& x, IntList dim = {}, bool keepdim = false);
Tensor amin(const Tensor& x, IntList dim = {}, bool keepdim = false);
Tensor argmax(const Tensor& x, OptInt dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, OptInt dim = std::nullopt, bool keepdim = false);
Tensor var(const Tensor& x, OptIntList dim = std::nullopt, OptScalar correction = std::nullopt, bool keepdim = false);
Tensor std_(const Tensor& x, OptIntList dim = std::nullopt, OptScalar correction = std::nullopt, bool keepdim = false);
Tensor logsumexp(const Tensor& x, IntList dim, bool keepdim = false);
Tensor any(const Tensor& x, OptIntList dim = std::nullopt, bool keepdim = false);
Tensor all(const Tensor& x, OptIntList dim = std::nullopt, bool keepdim = false);

// matrix products
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor addmm(const Tensor& self, const Tensor& m1, const Tensor& m2, Scalar beta = 1, Scalar alpha = 1);
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias = {});

// views
Tensor view(const Tensor& x, IntList size);
Tensor reshape(const Tensor& x, IntList shape);
Tensor permute(const Tensor& x, IntList dims);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
Tensor expand(const Tensor& x, IntList size);
Tensor slice(const Tensor& x, int64_t dim = 0, OptInt start = std::nullopt, OptInt end = std::nullopt, int64_t step = 1);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor squeeze(const Tensor& x, OptIntList dim = std::nullopt);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor as_strided(const Tensor& x, IntList size, IntList stride, OptInt storage_offset = std::nullopt);
Tensor diagonal(const Tensor& x, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

// copies
Tensor contiguous(const Tensor& x);
Tensor clone(const Tensor& x);
Tensor to(const Tensor& x, DType dtype);

// data movement
Tensor cat(const TensorList& xs, int64_t dim = 0);
Tensor stack(const TensorList& xs, int64_t dim = 0);
Tensor repeat(const Tensor& x, IntList repeats);
Tensor flip(const Tensor& x, IntList dims);
Tensor roll(const Tensor& x, IntList shifts, IntList dims = {});
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
Tensor pad(const Tensor& x, IntList pad, const std::string& mode = "constant", std::optional<double> value = std::nullopt);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const IValue& src);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor index(const Tensor& x, const OptTensorList& indices);
Tensor index_put(const Tensor& x, const OptTensorList& indices, const IValue& values, bool accumulate = false);
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1);

// creation
Tensor full(IntList size, Scalar fill, OptDType dtype = std::nullopt);
Tensor zeros(IntList size, OptDType dtype = std::nullopt);
Tensor ones(IntList size, OptDType dtype = std::nullopt);
Tensor arange(Scalar start, Scalar end, Scalar step = 1, OptDType dtype = std::nullopt);
Tensor linspace(Scalar start, Scalar end, int64_t steps, OptDType dtype = std::nullopt);
Tensor eye(int64_t n, OptInt m = std::nullopt, OptDType dtype = std::nullopt);
Tensor full_like(const Tensor& x, Scalar fill, OptDType dtype = std::nullopt);
Tensor zeros_like(const Tensor& x, OptDType dtype = std::nullopt);
Tensor ones_like(const Tensor& x, OptDType dtype = std::nullopt);

// random
Tensor rand(IntList size, OptDType dtype = std::nullopt);
Tensor randn(IntList size, OptDType dtype = std::nullopt);
Tensor randint(int64_t low, int64_t high, IntList size, OptDType dtype = std::nullopt);
Tensor bernoulli(const Tensor& x, std::optional<double> p = std::nullopt);
Tensor rand_like(const Tensor& x, OptDType dtype = std::nullopt);
Tensor randn_like(const Tensor& x, OptDType dtype = std::nullopt);

// nn
Tensor softmax(const Tensor& x, int64_t dim, OptDType dtype = std::nullopt);
Tensor log_softmax(const Tensor& x, int64_t dim, OptDType dtype = std::nullopt);
Tensor layer_norm(const Tensor& x, IntList normalized_shape, const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5);
Tensor rms_norm(const Tensor& x, IntList normalized_shape, const Tensor& weight = {}, std::optional<double> eps = std::nullopt);
Tensor dropout(const Tensor& x, double p, bool train);
Tensor mse_loss(const Tensor& x, const Tensor& target, int64_t reduction = 1);
Tensor nll_loss(const Tensor& x, const Tensor& target, const Tensor& weight = {}, int64_t reduction = 1, int64_t ignore_index = -100);
Tensor cross_entropy(const Tensor& x, const Tensor& target, const Tensor& weight = {}, int64_t reduction = 1,
                     int64_t ignore_index = -100, double label_smoothing = 0.0);
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum = 0.1, double eps = 1e-5);
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias = {}, IntList stride = {1, 1},
              IntList padding = {0, 0}, IntList dilation = {1, 1}, int64_t groups = 1);
Tensor max_pool2d(const Tensor& x, IntList kernel_size, IntList stride = {}, IntList padding = {0, 0},
                  IntList dilation = {1, 1}, bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& x, IntList kernel_size, IntList stride = {}, IntList padding = {0, 0},
                  bool ceil_mode = false, bool count_include_pad = true, OptInt divisor_override = std::nullopt);

// backward helpers of conv2d and the pools (first-order only; their VJPs call them)
Tensor conv2d_backward_input(const Tensor& grad_output, const Tensor& weight, IntList input_size, IntList stride,
                             IntList padding, IntList dilation, int64_t groups);
Tensor conv2d_backward_weight(const Tensor& grad_output, const Tensor& input, IntList weight_size, IntList stride,
                              IntList padding, IntList dilation, int64_t groups);
Tensor max_pool2d_backward(const Tensor& grad_output, const Tensor& x, IntList kernel_size, IntList stride,
                           IntList padding, IntList dilation, bool ceil_mode);
Tensor avg_pool2d_backward(const Tensor& grad_output, const Tensor& x, IntList kernel_size, IntList stride,
                           IntList padding, bool ceil_mode, bool count_include_pad, OptInt divisor_override);

// in-place (return their first argument)
Tensor add_(const Tensor& self, const IValue& other, Scalar alpha = 1);
Tensor mul_(const Tensor& self, const IValue& other);
Tensor copy_(const Tensor& self, const Tensor& src);
Tensor fill_(const Tensor& self, Scalar value);
Tensor zero_(const Tensor& self);

// Reduces a broadcast gradient back to `shape` (sums the broadcast dims). Used by VJPs.
Tensor sum_to(const Tensor& grad, const Shape& shape);

// operators
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a);

}  // namespace kiln
