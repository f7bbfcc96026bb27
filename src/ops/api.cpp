// Definitions of the typed API: each forwards to the dispatcher with its arguments in schema order.
// Generated once from api.h's declarations; keep the two in step when adding an op.
#include "ops/api.h"

#include "ops/dispatch.h"

namespace kiln {

Tensor abs(const Tensor& x, CallSite where) { return call_op1(OpId::abs, {x}, where); }
Tensor neg(const Tensor& x, CallSite where) { return call_op1(OpId::neg, {x}, where); }
Tensor exp(const Tensor& x, CallSite where) { return call_op1(OpId::exp, {x}, where); }
Tensor exp2(const Tensor& x, CallSite where) { return call_op1(OpId::exp2, {x}, where); }
Tensor log(const Tensor& x, CallSite where) { return call_op1(OpId::log, {x}, where); }
Tensor log2(const Tensor& x, CallSite where) { return call_op1(OpId::log2, {x}, where); }
Tensor log1p(const Tensor& x, CallSite where) { return call_op1(OpId::log1p, {x}, where); }
Tensor expm1(const Tensor& x, CallSite where) { return call_op1(OpId::expm1, {x}, where); }
Tensor sqrt(const Tensor& x, CallSite where) { return call_op1(OpId::sqrt, {x}, where); }
Tensor rsqrt(const Tensor& x, CallSite where) { return call_op1(OpId::rsqrt, {x}, where); }
Tensor sin(const Tensor& x, CallSite where) { return call_op1(OpId::sin, {x}, where); }
Tensor cos(const Tensor& x, CallSite where) { return call_op1(OpId::cos, {x}, where); }
Tensor tan(const Tensor& x, CallSite where) { return call_op1(OpId::tan, {x}, where); }
Tensor tanh(const Tensor& x, CallSite where) { return call_op1(OpId::tanh, {x}, where); }
Tensor asin(const Tensor& x, CallSite where) { return call_op1(OpId::asin, {x}, where); }
Tensor acos(const Tensor& x, CallSite where) { return call_op1(OpId::acos, {x}, where); }
Tensor atan(const Tensor& x, CallSite where) { return call_op1(OpId::atan, {x}, where); }
Tensor sinh(const Tensor& x, CallSite where) { return call_op1(OpId::sinh, {x}, where); }
Tensor cosh(const Tensor& x, CallSite where) { return call_op1(OpId::cosh, {x}, where); }
Tensor sigmoid(const Tensor& x, CallSite where) { return call_op1(OpId::sigmoid, {x}, where); }
Tensor relu(const Tensor& x, CallSite where) { return call_op1(OpId::relu, {x}, where); }
Tensor gelu(const Tensor& x, const std::string& approximate, CallSite where) { return call_op1(OpId::gelu, {x, approximate}, where); }
Tensor silu(const Tensor& x, CallSite where) { return call_op1(OpId::silu, {x}, where); }
Tensor erf(const Tensor& x, CallSite where) { return call_op1(OpId::erf, {x}, where); }
Tensor floor(const Tensor& x, CallSite where) { return call_op1(OpId::floor, {x}, where); }
Tensor ceil(const Tensor& x, CallSite where) { return call_op1(OpId::ceil, {x}, where); }
Tensor round(const Tensor& x, int64_t decimals, CallSite where) { return call_op1(OpId::round, {x, decimals}, where); }
Tensor trunc(const Tensor& x, CallSite where) { return call_op1(OpId::trunc, {x}, where); }
Tensor sign(const Tensor& x, CallSite where) { return call_op1(OpId::sign, {x}, where); }
Tensor reciprocal(const Tensor& x, CallSite where) { return call_op1(OpId::reciprocal, {x}, where); }
Tensor logical_not(const Tensor& x, CallSite where) { return call_op1(OpId::logical_not, {x}, where); }
Tensor isnan(const Tensor& x, CallSite where) { return call_op1(OpId::isnan, {x}, where); }
Tensor isinf(const Tensor& x, CallSite where) { return call_op1(OpId::isinf, {x}, where); }
Tensor add(const IValue& a, const IValue& b, Scalar alpha, CallSite where) { return call_op1(OpId::add, {a, b, alpha}, where); }
Tensor sub(const IValue& a, const IValue& b, Scalar alpha, CallSite where) { return call_op1(OpId::sub, {a, b, alpha}, where); }
Tensor mul(const IValue& a, const IValue& b, CallSite where) { return call_op1(OpId::mul, {a, b}, where); }
Tensor div(const IValue& a, const IValue& b, std::optional<std::string> rounding_mode, CallSite where) { return call_op1(OpId::div, {a, b, rounding_mode}, where); }
Tensor remainder(const IValue& a, const IValue& b, CallSite where) { return call_op1(OpId::remainder, {a, b}, where); }
Tensor pow(const IValue& a, const IValue& b, CallSite where) { return call_op1(OpId::pow, {a, b}, where); }
Tensor maximum(const Tensor& a, const Tensor& b, CallSite where) { return call_op1(OpId::maximum, {a, b}, where); }
Tensor minimum(const Tensor& a, const Tensor& b, CallSite where) { return call_op1(OpId::minimum, {a, b}, where); }
Tensor atan2(const Tensor& a, const Tensor& b, CallSite where) { return call_op1(OpId::atan2, {a, b}, where); }
Tensor eq(const IValue& a, const IValue& b, CallSite where) { return call_op1(OpId::eq, {a, b}, where); }
Tensor ne(const IValue& a, const IValue& b, CallSite where) { return call_op1(OpId::ne, {a, b}, where); }
Tensor lt(const IValue& a, const IValue& b, CallSite where) { return call_op1(OpId::lt, {a, b}, where); }
Tensor le(const IValue& a, const IValue& b, CallSite where) { return call_op1(OpId::le, {a, b}, where); }
Tensor gt(const IValue& a, const IValue& b, CallSite where) { return call_op1(OpId::gt, {a, b}, where); }
Tensor ge(const IValue& a, const IValue& b, CallSite where) { return call_op1(OpId::ge, {a, b}, where); }
Tensor logical_and(const Tensor& a, const Tensor& b, CallSite where) { return call_op1(OpId::logical_and, {a, b}, where); }
Tensor logical_or(const Tensor& a, const Tensor& b, CallSite where) { return call_op1(OpId::logical_or, {a, b}, where); }
Tensor logical_xor(const Tensor& a, const Tensor& b, CallSite where) { return call_op1(OpId::logical_xor, {a, b}, where); }
Tensor bitwise_and(const IValue& a, const IValue& b, CallSite where) { return call_op1(OpId::bitwise_and, {a, b}, where); }
Tensor bitwise_or(const IValue& a, const IValue& b, CallSite where) { return call_op1(OpId::bitwise_or, {a, b}, where); }
Tensor bitwise_xor(const IValue& a, const IValue& b, CallSite where) { return call_op1(OpId::bitwise_xor, {a, b}, where); }
Tensor where(const Tensor& cond, const IValue& a, const IValue& b, CallSite where) { return call_op1(OpId::where, {cond, a, b}, where); }
Tensor clamp(const Tensor& x, OptScalar min, OptScalar max, CallSite where) { return call_op1(OpId::clamp, {x, min, max}, where); }
Tensor lerp(const Tensor& x, const Tensor& end, const IValue& weight, CallSite where) { return call_op1(OpId::lerp, {x, end, weight}, where); }
Tensor addcmul(const Tensor& x, const Tensor& t1, const Tensor& t2, Scalar value, CallSite where) { return call_op1(OpId::addcmul, {x, t1, t2, value}, where); }
Tensor sum(const Tensor& x, OptIntList dim, bool keepdim, OptDType dtype, CallSite where) { return call_op1(OpId::sum, {x, dim, keepdim, dtype}, where); }
Tensor mean(const Tensor& x, OptIntList dim, bool keepdim, OptDType dtype, CallSite where) { return call_op1(OpId::mean, {x, dim, keepdim, dtype}, where); }
Tensor prod(const Tensor& x, OptInt dim, bool keepdim, OptDType dtype, CallSite where) { return call_op1(OpId::prod, {x, dim, keepdim, dtype}, where); }
Tensor amax(const Tensor& x, IntList dim, bool keepdim, CallSite where) { return call_op1(OpId::amax, {x, dim, keepdim}, where); }
Tensor amin(const Tensor& x, IntList dim, bool keepdim, CallSite where) { return call_op1(OpId::amin, {x, dim, keepdim}, where); }
Tensor argmax(const Tensor& x, OptInt dim, bool keepdim, CallSite where) { return call_op1(OpId::argmax, {x, dim, keepdim}, where); }
Tensor argmin(const Tensor& x, OptInt dim, bool keepdim, CallSite where) { return call_op1(OpId::argmin, {x, dim, keepdim}, where); }
Tensor cumsum(const Tensor& x, int64_t dim, OptDType dtype, CallSite where) { return call_op1(OpId::cumsum, {x, dim, dtype}, where); }
Tensor argsort(const Tensor& x, int64_t dim, bool descending, CallSite where) { return call_op1(OpId::argsort, {x, dim, descending}, where); }
Tensor var(const Tensor& x, OptIntList dim, OptScalar correction, bool keepdim, CallSite where) { return call_op1(OpId::var, {x, dim, correction, keepdim}, where); }
Tensor std_(const Tensor& x, OptIntList dim, OptScalar correction, bool keepdim, CallSite where) { return call_op1(OpId::std, {x, dim, correction, keepdim}, where); }
Tensor logsumexp(const Tensor& x, IntList dim, bool keepdim, CallSite where) { return call_op1(OpId::logsumexp, {x, dim, keepdim}, where); }
Tensor any(const Tensor& x, OptIntList dim, bool keepdim, CallSite where) { return call_op1(OpId::any, {x, dim, keepdim}, where); }
Tensor all(const Tensor& x, OptIntList dim, bool keepdim, CallSite where) { return call_op1(OpId::all, {x, dim, keepdim}, where); }
Tensor mm(const Tensor& a, const Tensor& b, CallSite where) { return call_op1(OpId::mm, {a, b}, where); }
Tensor bmm(const Tensor& a, const Tensor& b, CallSite where) { return call_op1(OpId::bmm, {a, b}, where); }
Tensor addmm(const Tensor& self, const Tensor& m1, const Tensor& m2, Scalar beta, Scalar alpha, CallSite where) { return call_op1(OpId::addmm, {self, m1, m2, beta, alpha}, where); }
Tensor matmul(const Tensor& a, const Tensor& b, CallSite where) { return call_op1(OpId::matmul, {a, b}, where); }
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias, CallSite where) { return call_op1(OpId::linear, {x, w, bias}, where); }
Tensor view(const Tensor& x, IntList size, CallSite where) { return call_op1(OpId::view, {x, size}, where); }
Tensor reshape(const Tensor& x, IntList shape, CallSite where) { return call_op1(OpId::reshape, {x, shape}, where); }
Tensor permute(const Tensor& x, IntList dims, CallSite where) { return call_op1(OpId::permute, {x, dims}, where); }
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1, CallSite where) { return call_op1(OpId::transpose, {x, d0, d1}, where); }
Tensor expand(const Tensor& x, IntList size, CallSite where) { return call_op1(OpId::expand, {x, size}, where); }
Tensor slice(const Tensor& x, int64_t dim, OptInt start, OptInt end, int64_t step, CallSite where) { return call_op1(OpId::slice, {x, dim, start, end, step}, where); }
Tensor select(const Tensor& x, int64_t dim, int64_t index, CallSite where) { return call_op1(OpId::select, {x, dim, index}, where); }
Tensor squeeze(const Tensor& x, OptIntList dim, CallSite where) { return call_op1(OpId::squeeze, {x, dim}, where); }
Tensor unsqueeze(const Tensor& x, int64_t dim, CallSite where) { return call_op1(OpId::unsqueeze, {x, dim}, where); }
Tensor as_strided(const Tensor& x, IntList size, IntList stride, OptInt storage_offset, CallSite where) { return call_op1(OpId::as_strided, {x, size, stride, storage_offset}, where); }
Tensor diagonal(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2, CallSite where) { return call_op1(OpId::diagonal, {x, offset, dim1, dim2}, where); }
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length, CallSite where) { return call_op1(OpId::narrow, {x, dim, start, length}, where); }
Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim, CallSite where) { return call_op1(OpId::flatten, {x, start_dim, end_dim}, where); }
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim, CallSite where) { return call_op(OpId::split, {x, split_size, dim}, where); }
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim, CallSite where) { return call_op(OpId::chunk, {x, chunks, dim}, where); }
Tensor contiguous(const Tensor& x, CallSite where) { return call_op1(OpId::contiguous, {x}, where); }
Tensor clone(const Tensor& x, CallSite where) { return call_op1(OpId::clone, {x}, where); }
Tensor to(const Tensor& x, DType dtype, CallSite where) { return call_op1(OpId::to, {x, dtype}, where); }
Tensor cat(const TensorList& xs, int64_t dim, CallSite where) { return call_op1(OpId::cat, {xs, dim}, where); }
Tensor stack(const TensorList& xs, int64_t dim, CallSite where) { return call_op1(OpId::stack, {xs, dim}, where); }
Tensor repeat(const Tensor& x, IntList repeats, CallSite where) { return call_op1(OpId::repeat, {x, repeats}, where); }
Tensor flip(const Tensor& x, IntList dims, CallSite where) { return call_op1(OpId::flip, {x, dims}, where); }
Tensor roll(const Tensor& x, IntList shifts, IntList dims, CallSite where) { return call_op1(OpId::roll, {x, shifts, dims}, where); }
Tensor tril(const Tensor& x, int64_t diagonal, CallSite where) { return call_op1(OpId::tril, {x, diagonal}, where); }
Tensor triu(const Tensor& x, int64_t diagonal, CallSite where) { return call_op1(OpId::triu, {x, diagonal}, where); }
Tensor pad(const Tensor& x, IntList pad, const std::string& mode, std::optional<double> value, CallSite where) { return call_op1(OpId::pad, {x, pad, mode, value}, where); }
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index, CallSite where) { return call_op1(OpId::index_select, {x, dim, index}, where); }
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index, CallSite where) { return call_op1(OpId::gather, {x, dim, index}, where); }
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const IValue& src, CallSite where) { return call_op1(OpId::scatter, {x, dim, index, src}, where); }
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, CallSite where) { return call_op1(OpId::scatter_add, {x, dim, index, src}, where); }
Tensor index(const Tensor& x, const OptTensorList& indices, CallSite where) { return call_op1(OpId::index, {x, indices}, where); }
Tensor index_put(const Tensor& x, const OptTensorList& indices, const IValue& values, bool accumulate, CallSite where) { return call_op1(OpId::index_put, {x, indices, values, accumulate}, where); }
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx, CallSite where) { return call_op1(OpId::embedding, {weight, indices, padding_idx}, where); }
Tensor full(IntList size, Scalar fill, OptDType dtype, CallSite where) { return call_op1(OpId::full, {size, fill, dtype}, where); }
Tensor zeros(IntList size, OptDType dtype, CallSite where) { return call_op1(OpId::zeros, {size, dtype}, where); }
Tensor ones(IntList size, OptDType dtype, CallSite where) { return call_op1(OpId::ones, {size, dtype}, where); }
Tensor arange(Scalar start, Scalar end, Scalar step, OptDType dtype, CallSite where) { return call_op1(OpId::arange, {start, end, step, dtype}, where); }
Tensor linspace(Scalar start, Scalar end, int64_t steps, OptDType dtype, CallSite where) { return call_op1(OpId::linspace, {start, end, steps, dtype}, where); }
Tensor eye(int64_t n, OptInt m, OptDType dtype, CallSite where) { return call_op1(OpId::eye, {n, m, dtype}, where); }
Tensor full_like(const Tensor& x, Scalar fill, OptDType dtype, CallSite where) { return call_op1(OpId::full_like, {x, fill, dtype}, where); }
Tensor zeros_like(const Tensor& x, OptDType dtype, CallSite where) { return call_op1(OpId::zeros_like, {x, dtype}, where); }
Tensor ones_like(const Tensor& x, OptDType dtype, CallSite where) { return call_op1(OpId::ones_like, {x, dtype}, where); }
Tensor rand(IntList size, OptDType dtype, CallSite where) { return call_op1(OpId::rand, {size, dtype}, where); }
Tensor randn(IntList size, OptDType dtype, CallSite where) { return call_op1(OpId::randn, {size, dtype}, where); }
Tensor randint(int64_t low, int64_t high, IntList size, OptDType dtype, CallSite where) { return call_op1(OpId::randint, {low, high, size, dtype}, where); }
Tensor bernoulli(const Tensor& x, std::optional<double> p, CallSite where) { return call_op1(OpId::bernoulli, {x, p}, where); }
Tensor rand_like(const Tensor& x, OptDType dtype, CallSite where) { return call_op1(OpId::rand_like, {x, dtype}, where); }
Tensor randn_like(const Tensor& x, OptDType dtype, CallSite where) { return call_op1(OpId::randn_like, {x, dtype}, where); }
Tensor softmax(const Tensor& x, int64_t dim, OptDType dtype, CallSite where) { return call_op1(OpId::softmax, {x, dim, dtype}, where); }
Tensor log_softmax(const Tensor& x, int64_t dim, OptDType dtype, CallSite where) { return call_op1(OpId::log_softmax, {x, dim, dtype}, where); }
Tensor layer_norm(const Tensor& x, IntList normalized_shape, const Tensor& weight, const Tensor& bias, double eps, CallSite where) { return call_op1(OpId::layer_norm, {x, normalized_shape, weight, bias, eps}, where); }
Tensor rms_norm(const Tensor& x, IntList normalized_shape, const Tensor& weight, std::optional<double> eps, CallSite where) { return call_op1(OpId::rms_norm, {x, normalized_shape, weight, eps}, where); }
Tensor dropout(const Tensor& x, double p, bool train, CallSite where) { return call_op1(OpId::dropout, {x, p, train}, where); }
Tensor mse_loss(const Tensor& x, const Tensor& target, int64_t reduction, CallSite where) { return call_op1(OpId::mse_loss, {x, target, reduction}, where); }
Tensor nll_loss(const Tensor& x, const Tensor& target, const Tensor& weight, int64_t reduction, int64_t ignore_index, CallSite where) { return call_op1(OpId::nll_loss, {x, target, weight, reduction, ignore_index}, where); }
Tensor cross_entropy(const Tensor& x, const Tensor& target, const Tensor& weight, int64_t reduction, int64_t ignore_index, double label_smoothing, CallSite where) { return call_op1(OpId::cross_entropy, {x, target, weight, reduction, ignore_index, label_smoothing}, where); }
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean, const Tensor& running_var, bool training, double momentum, double eps, CallSite where) { return call_op1(OpId::batch_norm, {x, weight, bias, running_mean, running_var, training, momentum, eps}, where); }
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, IntList stride, IntList padding, IntList dilation, int64_t groups, CallSite where) { return call_op1(OpId::conv2d, {x, w, bias, stride, padding, dilation, groups}, where); }
Tensor max_pool2d(const Tensor& x, IntList kernel_size, IntList stride, IntList padding, IntList dilation, bool ceil_mode, CallSite where) { return call_op1(OpId::max_pool2d, {x, kernel_size, stride, padding, dilation, ceil_mode}, where); }
Tensor convolution(const Tensor& x, const Tensor& w, const Tensor& bias, IntList stride, IntList padding, IntList dilation, bool transposed, IntList output_padding, int64_t groups, CallSite where) { return call_op1(OpId::convolution, {x, w, bias, stride, padding, dilation, transposed, output_padding, groups}, where); }
Tensor upsample_nearest2d(const Tensor& x, IntList output_size, std::optional<double> scales_h, std::optional<double> scales_w, CallSite where) { return call_op1(OpId::upsample_nearest2d, {x, output_size, scales_h, scales_w}, where); }
Tensor upsample_bilinear2d(const Tensor& x, IntList output_size, bool align_corners, std::optional<double> scales_h, std::optional<double> scales_w, CallSite where) { return call_op1(OpId::upsample_bilinear2d, {x, output_size, align_corners, scales_h, scales_w}, where); }
Tensor avg_pool2d(const Tensor& x, IntList kernel_size, IntList stride, IntList padding, bool ceil_mode, bool count_include_pad, OptInt divisor_override, CallSite where) { return call_op1(OpId::avg_pool2d, {x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override}, where); }
Tensor conv2d_backward_input(const Tensor& grad_output, const Tensor& weight, IntList input_size, IntList stride, IntList padding, IntList dilation, int64_t groups, CallSite where) { return call_op1(OpId::conv2d_backward_input, {grad_output, weight, input_size, stride, padding, dilation, groups}, where); }
Tensor conv2d_backward_weight(const Tensor& grad_output, const Tensor& input, IntList weight_size, IntList stride, IntList padding, IntList dilation, int64_t groups, CallSite where) { return call_op1(OpId::conv2d_backward_weight, {grad_output, input, weight_size, stride, padding, dilation, groups}, where); }
Tensor max_pool2d_backward(const Tensor& grad_output, const Tensor& x, IntList kernel_size, IntList stride, IntList padding, IntList dilation, bool ceil_mode, CallSite where) { return call_op1(OpId::max_pool2d_backward, {grad_output, x, kernel_size, stride, padding, dilation, ceil_mode}, where); }
Tensor avg_pool2d_backward(const Tensor& grad_output, const Tensor& x, IntList kernel_size, IntList stride, IntList padding, bool ceil_mode, bool count_include_pad, OptInt divisor_override, CallSite where) { return call_op1(OpId::avg_pool2d_backward, {grad_output, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override}, where); }
Tensor add_(const Tensor& self, const IValue& other, Scalar alpha, CallSite where) { return call_op1(OpId::add_, {self, other, alpha}, where); }
Tensor mul_(const Tensor& self, const IValue& other, CallSite where) { return call_op1(OpId::mul_, {self, other}, where); }
Tensor copy_(const Tensor& self, const Tensor& src, CallSite where) { return call_op1(OpId::copy_, {self, src}, where); }
Tensor fill_(const Tensor& self, Scalar value, CallSite where) { return call_op1(OpId::fill_, {self, value}, where); }
Tensor zero_(const Tensor& self, CallSite where) { return call_op1(OpId::zero_, {self}, where); }

Tensor operator+(TensorOperand a, const Tensor& b) { return add(a.tensor, b, 1, a.where); }
Tensor operator-(TensorOperand a, const Tensor& b) { return sub(a.tensor, b, 1, a.where); }
Tensor operator*(TensorOperand a, const Tensor& b) { return mul(a.tensor, b, a.where); }
Tensor operator/(TensorOperand a, const Tensor& b) { return div(a.tensor, b, std::nullopt, a.where); }
Tensor operator+(TensorOperand a, Scalar b) { return add(a.tensor, b, 1, a.where); }
Tensor operator-(TensorOperand a, Scalar b) { return sub(a.tensor, b, 1, a.where); }
Tensor operator*(TensorOperand a, Scalar b) { return mul(a.tensor, b, a.where); }
Tensor operator/(TensorOperand a, Scalar b) { return div(a.tensor, b, std::nullopt, a.where); }
Tensor operator+(Scalar a, TensorOperand b) { return add(a, b.tensor, 1, b.where); }
Tensor operator-(Scalar a, TensorOperand b) { return sub(a, b.tensor, 1, b.where); }
Tensor operator*(Scalar a, TensorOperand b) { return mul(a, b.tensor, b.where); }
Tensor operator/(Scalar a, TensorOperand b) { return div(a, b.tensor, std::nullopt, b.where); }
Tensor operator-(TensorOperand a) { return neg(a.tensor, a.where); }

}  // namespace kiln
