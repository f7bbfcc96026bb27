// Definitions of the typed API: each forwards to the dispatcher with its arguments in schema order.
// Generated once from api.h's declarations; keep the two in step when adding an op.
#include "ops/api.h"

#include "ops/dispatch.h"

namespace kiln {

Tensor abs(const Tensor& x) { return call_op1(OpId::abs, {x}); }
Tensor neg(const Tensor& x) { return call_op1(OpId::neg, {x}); }
Tensor exp(const Tensor& x) { return call_op1(OpId::exp, {x}); }
Tensor exp2(const Tensor& x) { return call_op1(OpId::exp2, {x}); }
Tensor log(const Tensor& x) { return call_op1(OpId::log, {x}); }
Tensor log2(const Tensor& x) { return call_op1(OpId::log2, {x}); }
Tensor log1p(const Tensor& x) { return call_op1(OpId::log1p, {x}); }
Tensor expm1(const Tensor& x) { return call_op1(OpId::expm1, {x}); }
Tensor sqrt(const Tensor& x) { return call_op1(OpId::sqrt, {x}); }
Tensor rsqrt(const Tensor& x) { return call_op1(OpId::rsqrt, {x}); }
Tensor sin(const Tensor& x) { return call_op1(OpId::sin, {x}); }
Tensor cos(const Tensor& x) { return call_op1(OpId::cos, {x}); }
Tensor tan(const Tensor& x) { return call_op1(OpId::tan, {x}); }
Tensor tanh(const Tensor& x) { return call_op1(OpId::tanh, {x}); }
Tensor asin(const Tensor& x) { return call_op1(OpId::asin, {x}); }
Tensor acos(const Tensor& x) { return call_op1(OpId::acos, {x}); }
Tensor atan(const Tensor& x) { return call_op1(OpId::atan, {x}); }
Tensor sinh(const Tensor& x) { return call_op1(OpId::sinh, {x}); }
Tensor cosh(const Tensor& x) { return call_op1(OpId::cosh, {x}); }
Tensor sigmoid(const Tensor& x) { return call_op1(OpId::sigmoid, {x}); }
Tensor relu(const Tensor& x) { return call_op1(OpId::relu, {x}); }
Tensor gelu(const Tensor& x, const std::string& approximate) { return call_op1(OpId::gelu, {x, approximate}); }
Tensor silu(const Tensor& x) { return call_op1(OpId::silu, {x}); }
Tensor erf(const Tensor& x) { return call_op1(OpId::erf, {x}); }
Tensor floor(const Tensor& x) { return call_op1(OpId::floor, {x}); }
Tensor ceil(const Tensor& x) { return call_op1(OpId::ceil, {x}); }
Tensor round(const Tensor& x, int64_t decimals) { return call_op1(OpId::round, {x, decimals}); }
Tensor trunc(const Tensor& x) { return call_op1(OpId::trunc, {x}); }
Tensor sign(const Tensor& x) { return call_op1(OpId::sign, {x}); }
Tensor reciprocal(const Tensor& x) { return call_op1(OpId::reciprocal, {x}); }
Tensor logical_not(const Tensor& x) { return call_op1(OpId::logical_not, {x}); }
Tensor isnan(const Tensor& x) { return call_op1(OpId::isnan, {x}); }
Tensor isinf(const Tensor& x) { return call_op1(OpId::isinf, {x}); }
Tensor add(const IValue& a, const IValue& b, Scalar alpha) { return call_op1(OpId::add, {a, b, alpha}); }
Tensor sub(const IValue& a, const IValue& b, Scalar alpha) { return call_op1(OpId::sub, {a, b, alpha}); }
Tensor mul(const IValue& a, const IValue& b) { return call_op1(OpId::mul, {a, b}); }
Tensor div(const IValue& a, const IValue& b, std::optional<std::string> rounding_mode) { return call_op1(OpId::div, {a, b, rounding_mode}); }
Tensor remainder(const IValue& a, const IValue& b) { return call_op1(OpId::remainder, {a, b}); }
Tensor pow(const IValue& a, const IValue& b) { return call_op1(OpId::pow, {a, b}); }
Tensor maximum(const Tensor& a, const Tensor& b) { return call_op1(OpId::maximum, {a, b}); }
Tensor minimum(const Tensor& a, const Tensor& b) { return call_op1(OpId::minimum, {a, b}); }
Tensor atan2(const Tensor& a, const Tensor& b) { return call_op1(OpId::atan2, {a, b}); }
Tensor eq(const IValue& a, const IValue& b) { return call_op1(OpId::eq, {a, b}); }
Tensor ne(const IValue& a, const IValue& b) { return call_op1(OpId::ne, {a, b}); }
Tensor lt(const IValue& a, const IValue& b) { return call_op1(OpId::lt, {a, b}); }
Tensor le(const IValue& a, const IValue& b) { return call_op1(OpId::le, {a, b}); }
Tensor gt(const IValue& a, const IValue& b) { return call_op1(OpId::gt, {a, b}); }
Tensor ge(const IValue& a, const IValue& b) { return call_op1(OpId::ge, {a, b}); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return call_op1(OpId::logical_and, {a, b}); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return call_op1(OpId::logical_or, {a, b}); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return call_op1(OpId::logical_xor, {a, b}); }
Tensor bitwise_and(const IValue& a, const IValue& b) { return call_op1(OpId::bitwise_and, {a, b}); }
Tensor bitwise_or(const IValue& a, const IValue& b) { return call_op1(OpId::bitwise_or, {a, b}); }
Tensor bitwise_xor(const IValue& a, const IValue& b) { return call_op1(OpId::bitwise_xor, {a, b}); }
Tensor where(const Tensor& cond, const IValue& a, const IValue& b) { return call_op1(OpId::where, {cond, a, b}); }
Tensor clamp(const Tensor& x, OptScalar min, OptScalar max) { return call_op1(OpId::clamp, {x, min, max}); }
Tensor lerp(const Tensor& x, const Tensor& end, const IValue& weight) { return call_op1(OpId::lerp, {x, end, weight}); }
Tensor addcmul(const Tensor& x, const Tensor& t1, const Tensor& t2, Scalar value) { return call_op1(OpId::addcmul, {x, t1, t2, value}); }
Tensor sum(const Tensor& x, OptIntList dim, bool keepdim, OptDType dtype) { return call_op1(OpId::sum, {x, dim, keepdim, dtype}); }
Tensor mean(const Tensor& x, OptIntList dim, bool keepdim, OptDType dtype) { return call_op1(OpId::mean, {x, dim, keepdim, dtype}); }
Tensor prod(const Tensor& x, OptInt dim, bool keepdim, OptDType dtype) { return call_op1(OpId::prod, {x, dim, keepdim, dtype}); }
Tensor amax(const Tensor& x, IntList dim, bool keepdim) { return call_op1(OpId::amax, {x, dim, keepdim}); }
Tensor amin(const Tensor& x, IntList dim, bool keepdim) { return call_op1(OpId::amin, {x, dim, keepdim}); }
Tensor argmax(const Tensor& x, OptInt dim, bool keepdim) { return call_op1(OpId::argmax, {x, dim, keepdim}); }
Tensor argmin(const Tensor& x, OptInt dim, bool keepdim) { return call_op1(OpId::argmin, {x, dim, keepdim}); }
Tensor var(const Tensor& x, OptIntList dim, OptScalar correction, bool keepdim) { return call_op1(OpId::var, {x, dim, correction, keepdim}); }
Tensor std_(const Tensor& x, OptIntList dim, OptScalar correction, bool keepdim) { return call_op1(OpId::std, {x, dim, correction, keepdim}); }
Tensor logsumexp(const Tensor& x, IntList dim, bool keepdim) { return call_op1(OpId::logsumexp, {x, dim, keepdim}); }
Tensor any(const Tensor& x, OptIntList dim, bool keepdim) { return call_op1(OpId::any, {x, dim, keepdim}); }
Tensor all(const Tensor& x, OptIntList dim, bool keepdim) { return call_op1(OpId::all, {x, dim, keepdim}); }
Tensor mm(const Tensor& a, const Tensor& b) { return call_op1(OpId::mm, {a, b}); }
Tensor bmm(const Tensor& a, const Tensor& b) { return call_op1(OpId::bmm, {a, b}); }
Tensor addmm(const Tensor& self, const Tensor& m1, const Tensor& m2, Scalar beta, Scalar alpha) { return call_op1(OpId::addmm, {self, m1, m2, beta, alpha}); }
Tensor matmul(const Tensor& a, const Tensor& b) { return call_op1(OpId::matmul, {a, b}); }
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias) { return call_op1(OpId::linear, {x, w, bias}); }
Tensor view(const Tensor& x, IntList size) { return call_op1(OpId::view, {x, size}); }
Tensor reshape(const Tensor& x, IntList shape) { return call_op1(OpId::reshape, {x, shape}); }
Tensor permute(const Tensor& x, IntList dims) { return call_op1(OpId::permute, {x, dims}); }
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) { return call_op1(OpId::transpose, {x, d0, d1}); }
Tensor expand(const Tensor& x, IntList size) { return call_op1(OpId::expand, {x, size}); }
Tensor slice(const Tensor& x, int64_t dim, OptInt start, OptInt end, int64_t step) { return call_op1(OpId::slice, {x, dim, start, end, step}); }
Tensor select(const Tensor& x, int64_t dim, int64_t index) { return call_op1(OpId::select, {x, dim, index}); }
Tensor squeeze(const Tensor& x, OptIntList dim) { return call_op1(OpId::squeeze, {x, dim}); }
Tensor unsqueeze(const Tensor& x, int64_t dim) { return call_op1(OpId::unsqueeze, {x, dim}); }
Tensor as_strided(const Tensor& x, IntList size, IntList stride, OptInt storage_offset) { return call_op1(OpId::as_strided, {x, size, stride, storage_offset}); }
Tensor diagonal(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) { return call_op1(OpId::diagonal, {x, offset, dim1, dim2}); }
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) { return call_op1(OpId::narrow, {x, dim, start, length}); }
Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) { return call_op1(OpId::flatten, {x, start_dim, end_dim}); }
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) { return call_op(OpId::split, {x, split_size, dim}); }
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) { return call_op(OpId::chunk, {x, chunks, dim}); }
Tensor contiguous(const Tensor& x) { return call_op1(OpId::contiguous, {x}); }
Tensor clone(const Tensor& x) { return call_op1(OpId::clone, {x}); }
Tensor to(const Tensor& x, DType dtype) { return call_op1(OpId::to, {x, dtype}); }
Tensor cat(const TensorList& xs, int64_t dim) { return call_op1(OpId::cat, {xs, dim}); }
Tensor stack(const TensorList& xs, int64_t dim) { return call_op1(OpId::stack, {xs, dim}); }
Tensor repeat(const Tensor& x, IntList repeats) { return call_op1(OpId::repeat, {x, repeats}); }
Tensor flip(const Tensor& x, IntList dims) { return call_op1(OpId::flip, {x, dims}); }
Tensor roll(const Tensor& x, IntList shifts, IntList dims) { return call_op1(OpId::roll, {x, shifts, dims}); }
Tensor tril(const Tensor& x, int64_t diagonal) { return call_op1(OpId::tril, {x, diagonal}); }
Tensor triu(const Tensor& x, int64_t diagonal) { return call_op1(OpId::triu, {x, diagonal}); }
Tensor pad(const Tensor& x, IntList pad, const std::string& mode, std::optional<double> value) { return call_op1(OpId::pad, {x, pad, mode, value}); }
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) { return call_op1(OpId::index_select, {x, dim, index}); }
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) { return call_op1(OpId::gather, {x, dim, index}); }
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const IValue& src) { return call_op1(OpId::scatter, {x, dim, index, src}); }
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) { return call_op1(OpId::scatter_add, {x, dim, index, src}); }
Tensor index(const Tensor& x, const OptTensorList& indices) { return call_op1(OpId::index, {x, indices}); }
Tensor index_put(const Tensor& x, const OptTensorList& indices, const IValue& values, bool accumulate) { return call_op1(OpId::index_put, {x, indices, values, accumulate}); }
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx) { return call_op1(OpId::embedding, {weight, indices, padding_idx}); }
Tensor full(IntList size, Scalar fill, OptDType dtype) { return call_op1(OpId::full, {size, fill, dtype}); }
Tensor zeros(IntList size, OptDType dtype) { return call_op1(OpId::zeros, {size, dtype}); }
Tensor ones(IntList size, OptDType dtype) { return call_op1(OpId::ones, {size, dtype}); }
Tensor arange(Scalar start, Scalar end, Scalar step, OptDType dtype) { return call_op1(OpId::arange, {start, end, step, dtype}); }
Tensor linspace(Scalar start, Scalar end, int64_t steps, OptDType dtype) { return call_op1(OpId::linspace, {start, end, steps, dtype}); }
Tensor eye(int64_t n, OptInt m, OptDType dtype) { return call_op1(OpId::eye, {n, m, dtype}); }
Tensor full_like(const Tensor& x, Scalar fill, OptDType dtype) { return call_op1(OpId::full_like, {x, fill, dtype}); }
Tensor zeros_like(const Tensor& x, OptDType dtype) { return call_op1(OpId::zeros_like, {x, dtype}); }
Tensor ones_like(const Tensor& x, OptDType dtype) { return call_op1(OpId::ones_like, {x, dtype}); }
Tensor rand(IntList size, OptDType dtype) { return call_op1(OpId::rand, {size, dtype}); }
Tensor randn(IntList size, OptDType dtype) { return call_op1(OpId::randn, {size, dtype}); }
Tensor randint(int64_t low, int64_t high, IntList size, OptDType dtype) { return call_op1(OpId::randint, {low, high, size, dtype}); }
Tensor bernoulli(const Tensor& x, std::optional<double> p) { return call_op1(OpId::bernoulli, {x, p}); }
Tensor rand_like(const Tensor& x, OptDType dtype) { return call_op1(OpId::rand_like, {x, dtype}); }
Tensor randn_like(const Tensor& x, OptDType dtype) { return call_op1(OpId::randn_like, {x, dtype}); }
Tensor softmax(const Tensor& x, int64_t dim, OptDType dtype) { return call_op1(OpId::softmax, {x, dim, dtype}); }
Tensor log_softmax(const Tensor& x, int64_t dim, OptDType dtype) { return call_op1(OpId::log_softmax, {x, dim, dtype}); }
Tensor layer_norm(const Tensor& x, IntList normalized_shape, const Tensor& weight, const Tensor& bias, double eps) { return call_op1(OpId::layer_norm, {x, normalized_shape, weight, bias, eps}); }
Tensor rms_norm(const Tensor& x, IntList normalized_shape, const Tensor& weight, std::optional<double> eps) { return call_op1(OpId::rms_norm, {x, normalized_shape, weight, eps}); }
Tensor dropout(const Tensor& x, double p, bool train) { return call_op1(OpId::dropout, {x, p, train}); }
Tensor mse_loss(const Tensor& x, const Tensor& target, int64_t reduction) { return call_op1(OpId::mse_loss, {x, target, reduction}); }
Tensor nll_loss(const Tensor& x, const Tensor& target, const Tensor& weight, int64_t reduction, int64_t ignore_index) { return call_op1(OpId::nll_loss, {x, target, weight, reduction, ignore_index}); }
Tensor cross_entropy(const Tensor& x, const Tensor& target, const Tensor& weight, int64_t reduction, int64_t ignore_index, double label_smoothing) { return call_op1(OpId::cross_entropy, {x, target, weight, reduction, ignore_index, label_smoothing}); }
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean, const Tensor& running_var, bool training, double momentum, double eps) { return call_op1(OpId::batch_norm, {x, weight, bias, running_mean, running_var, training, momentum, eps}); }
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, IntList stride, IntList padding, IntList dilation, int64_t groups) { return call_op1(OpId::conv2d, {x, w, bias, stride, padding, dilation, groups}); }
Tensor max_pool2d(const Tensor& x, IntList kernel_size, IntList stride, IntList padding, IntList dilation, bool ceil_mode) { return call_op1(OpId::max_pool2d, {x, kernel_size, stride, padding, dilation, ceil_mode}); }
Tensor avg_pool2d(const Tensor& x, IntList kernel_size, IntList stride, IntList padding, bool ceil_mode, bool count_include_pad, OptInt divisor_override) { return call_op1(OpId::avg_pool2d, {x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override}); }
Tensor conv2d_backward_input(const Tensor& grad_output, const Tensor& weight, IntList input_size, IntList stride, IntList padding, IntList dilation, int64_t groups) { return call_op1(OpId::conv2d_backward_input, {grad_output, weight, input_size, stride, padding, dilation, groups}); }
Tensor conv2d_backward_weight(const Tensor& grad_output, const Tensor& input, IntList weight_size, IntList stride, IntList padding, IntList dilation, int64_t groups) { return call_op1(OpId::conv2d_backward_weight, {grad_output, input, weight_size, stride, padding, dilation, groups}); }
Tensor max_pool2d_backward(const Tensor& grad_output, const Tensor& x, IntList kernel_size, IntList stride, IntList padding, IntList dilation, bool ceil_mode) { return call_op1(OpId::max_pool2d_backward, {grad_output, x, kernel_size, stride, padding, dilation, ceil_mode}); }
Tensor avg_pool2d_backward(const Tensor& grad_output, const Tensor& x, IntList kernel_size, IntList stride, IntList padding, bool ceil_mode, bool count_include_pad, OptInt divisor_override) { return call_op1(OpId::avg_pool2d_backward, {grad_output, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override}); }
Tensor add_(const Tensor& self, const IValue& other, Scalar alpha) { return call_op1(OpId::add_, {self, other, alpha}); }
Tensor mul_(const Tensor& self, const IValue& other) { return call_op1(OpId::mul_, {self, other}); }
Tensor copy_(const Tensor& self, const Tensor& src) { return call_op1(OpId::copy_, {self, src}); }
Tensor fill_(const Tensor& self, Scalar value) { return call_op1(OpId::fill_, {self, value}); }
Tensor zero_(const Tensor& self) { return call_op1(OpId::zero_, {self}); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
Tensor operator+(Scalar a, const Tensor& b) { return add(a, b); }
Tensor operator-(Scalar a, const Tensor& b) { return sub(a, b); }
Tensor operator*(Scalar a, const Tensor& b) { return mul(a, b); }
Tensor operator/(Scalar a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }

}  // namespace kiln
