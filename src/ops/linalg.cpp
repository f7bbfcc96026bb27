// Matrix products: mm, bmm, addmm (BLAS gemm, ops/blas.h, for f32/f64; f16/bf16 through f32; integers with an
// i64 accumulating loop), and the decompositions matmul (full torch.matmul semantics) and linear.
#include "eager/loops.h"
#include "ops/blas.h"
#include "ops/common.h"
#include "ops/families.h"

namespace kiln {

std::optional<BlasLayout> blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= std::max<int64_t>(1, cols)))
    return BlasLayout{false, rows == 1 ? std::max<int64_t>(1, cols) : rs};
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= std::max<int64_t>(1, rows)))
    return BlasLayout{true, cols == 1 ? std::max<int64_t>(1, rows) : cs};
  return std::nullopt;
}

namespace {

// out[B, m, n] (contiguous, already holding the addend when `beta` != 0) = alpha * a @ b + beta * out, with
// a [B, m, k] and b [B, k, n] of out's dtype (f32 or f64), any strides (batch strides may be 0).
template <class T>
void blas_batched(const Tensor& out, Tensor a, Tensor b, T alpha, T beta) {
  const int64_t B = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  auto layout_of = [](Tensor& t) {
    auto l = blas_layout(t.size(1), t.size(2), t.stride(1), t.stride(2));
    if (l) return *l;
    t = contiguous(t);
    return *blas_layout(t.size(1), t.size(2), t.stride(1), t.stride(2));
  };
  const BlasLayout la = layout_of(a), lb = layout_of(b);
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* po = out.data<T>();
  for (int64_t i = 0; i < B; ++i)
    gemm(la.transposed, lb.transposed, m, n, k, alpha, pa + i * a.stride(0), la.ld, pb + i * b.stride(0), lb.ld, beta,
         po + i * m * n, n);
}

// The integer product: i64 accumulation (wrapping like PyTorch's integer arithmetic when stored).
template <class T>
void integer_batched(const Tensor& out, const Tensor& a, const Tensor& b, int64_t alpha, int64_t beta) {
  const int64_t B = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* po = out.data<T>();
  parallel_for(B * m, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, n * k)), [&](int64_t rb, int64_t re) {
    std::vector<int64_t> acc(static_cast<size_t>(n));
    for (int64_t r = rb; r < re; ++r) {
      const int64_t bi = r / m, i = r % m;
      std::fill(acc.begin(), acc.end(), 0);
      const T* arow = pa + bi * a.stride(0) + i * a.stride(1);
      const T* bmat = pb + bi * b.stride(0);
      for (int64_t p = 0; p < k; ++p) {
        const int64_t av = int64_t(arow[p * a.stride(2)]);
        const T* brow = bmat + p * b.stride(1);
        for (int64_t j = 0; j < n; ++j) acc[size_t(j)] += av * int64_t(brow[j * b.stride(2)]);
      }
      T* orow = po + r * n;
      for (int64_t j = 0; j < n; ++j)
        orow[j] = T(uint64_t(alpha) * uint64_t(acc[size_t(j)]) + (beta == 0 ? 0 : uint64_t(beta) * uint64_t(orow[j])));
    }
  });
}

// alpha * a @ b + beta * addend for a [B, m, k], b [B, k, n] of one dtype; `addend` (undefined for none)
// broadcasts to [B, m, n] and is ignored when beta is 0 (its NaNs do not propagate, as in PyTorch).
// f16/bf16 compute in f32 and round once. Returns a contiguous [B, m, n] tensor of a's dtype.
Tensor batched_product(const Tensor& a, const Tensor& b, const Tensor& addend, Scalar alpha, Scalar beta) {
  const DType dt = a.dtype();
  const DType cdt = is_low_precision(dt) ? DType::F32 : dt;
  const int64_t B = a.size(0), m = a.size(1), n = b.size(2), k = a.size(2);
  const bool use_addend = addend.defined() && beta.to_double() != 0;
  Tensor out = Tensor::empty({B, m, n}, cdt);
  if (use_addend) copy_into(out, addend);
  if (out.numel() == 0) return as_contiguous_dtype(out, dt);
  if (k == 0) {  // empty sum: only the addend term remains
    Tensor scaled = use_addend ? mul(out, beta) : zeros({B, m, n}, cdt);
    return as_contiguous_dtype(scaled, dt);
  }
  const double beta_used = use_addend ? beta.to_double() : 0.0;
  if (is_floating(cdt)) {
    Tensor ac = a.dtype() == cdt ? a : as_contiguous_dtype(a, cdt);
    Tensor bc = b.dtype() == cdt ? b : as_contiguous_dtype(b, cdt);
    if (cdt == DType::F64) blas_batched<double>(out, ac, bc, alpha.to_double(), beta_used);
    else blas_batched<float>(out, ac, bc, float(alpha.to_double()), float(beta_used));
    return cdt == dt ? out : as_contiguous_dtype(out, dt);
  }
  KILN_DISPATCH_ALL(dt, [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
      integer_batched<T>(out, a, b, alpha.to_int(), use_addend ? beta.to_int() : 0);
  });
  return out;
}

// Common checks of the matrix products: dtypes equal and supported.
void check_product_dtypes(std::string_view op, const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dtype() == b.dtype(), "{}: expected both operands to have the same dtype, but got {} and {} "
             "(shapes {} and {}); convert one with to()", op, dtype_name(a.dtype()), dtype_name(b.dtype()),
             shape_str(a.sizes()), shape_str(b.sizes()));
  KILN_CHECK(a.dtype() != DType::Bool, "{}: not implemented for bool tensors (shapes {} and {})", op,
             shape_str(a.sizes()), shape_str(b.sizes()));
}
std::string matrix_str(const Tensor& t) { return fmt::format("{}x{}", t.size(0), t.size(1)); }

// ---------------------------------------------------------------- mm
void check_mm(std::string_view op, const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() == 2 && b.dim() == 2, "{}: both operands must be matrices (2-D), got shapes {} and {}", op,
             shape_str(a.sizes()), shape_str(b.sizes()));
  KILN_CHECK(a.size(1) == b.size(0), "{}: mat1 and mat2 shapes cannot be multiplied ({} and {}): mat1's columns "
             "must equal mat2's rows", op, matrix_str(a), matrix_str(b));
  check_product_dtypes(op, a, b);
}
std::vector<TensorMeta> mm_infer(const OpCall& c) {
  const Tensor &a = c.tensor(0), &b = c.tensor(1);
  check_mm("mm", a, b);
  return {contiguous_meta({a.size(0), b.size(1)}, a.dtype())};
}
std::vector<Tensor> mm_kernel(const OpCall& c) {
  const Tensor &a = c.tensor(0), &b = c.tensor(1);
  check_mm("mm", a, b);
  return {view(batched_product(unsqueeze(a, 0), unsqueeze(b, 0), Tensor(), 1, 0), {a.size(0), b.size(1)})};
}
std::vector<Tensor> mm_vjp(const VjpCall& v) {
  const Tensor &a = v.call.tensor(0), &b = v.call.tensor(1), &g = v.grads[0];
  return {if_needed(v.needs(0), [&] { return mm(g, transpose(b, 0, 1)); }),
          if_needed(v.needs(1), [&] { return mm(transpose(a, 0, 1), g); })};
}

// ---------------------------------------------------------------- bmm
void check_bmm(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() == 3 && b.dim() == 3, "bmm: both operands must be batches of matrices (3-D), got shapes {} "
             "and {}", shape_str(a.sizes()), shape_str(b.sizes()));
  KILN_CHECK(a.size(0) == b.size(0), "bmm: batch sizes differ ({} and {}; shapes {} and {}); bmm does not "
             "broadcast, use matmul", a.size(0), b.size(0), shape_str(a.sizes()), shape_str(b.sizes()));
  KILN_CHECK(a.size(2) == b.size(1), "bmm: shapes {} and {} cannot be multiplied: batch1's last dim ({}) must "
             "equal batch2's middle dim ({})", shape_str(a.sizes()), shape_str(b.sizes()), a.size(2), b.size(1));
  check_product_dtypes("bmm", a, b);
}
std::vector<TensorMeta> bmm_infer(const OpCall& c) {
  const Tensor &a = c.tensor(0), &b = c.tensor(1);
  check_bmm(a, b);
  return {contiguous_meta({a.size(0), a.size(1), b.size(2)}, a.dtype())};
}
std::vector<Tensor> bmm_kernel(const OpCall& c) {
  const Tensor &a = c.tensor(0), &b = c.tensor(1);
  check_bmm(a, b);
  return {batched_product(a, b, Tensor(), 1, 0)};
}
std::vector<Tensor> bmm_vjp(const VjpCall& v) {
  const Tensor &a = v.call.tensor(0), &b = v.call.tensor(1), &g = v.grads[0];
  return {if_needed(v.needs(0), [&] { return bmm(g, transpose(b, 1, 2)); }),
          if_needed(v.needs(1), [&] { return bmm(transpose(a, 1, 2), g); })};
}

// ---------------------------------------------------------------- addmm
void check_addmm(const OpCall& c) {
  const Tensor &self = c.tensor(0), &a = c.tensor(1), &b = c.tensor(2);
  check_mm("addmm", a, b);
  const Shape product{a.size(0), b.size(1)};
  bool broadcasts = self.dim() <= 2;
  for (int64_t i = 1; i <= self.dim() && broadcasts; ++i)
    broadcasts = self.size(-i) == 1 || self.size(-i) == product[size_t(2 - i)];
  KILN_CHECK(broadcasts,
             "addmm: self of shape {} cannot be broadcast to the product's shape {} (mat1 {} @ mat2 {})",
             shape_str(self.sizes()), shape_str(product), shape_str(a.sizes()), shape_str(b.sizes()));
  KILN_CHECK(self.is_wrapped_number() || self.dtype() == a.dtype(), "addmm: self ({}) must have the dtype of mat1 "
             "and mat2 ({})", dtype_name(self.dtype()), dtype_name(a.dtype()));
  KILN_CHECK(is_floating(a.dtype()) || (!c.scalar(3).is_float() && !c.scalar(4).is_float()),
             "addmm: beta ({}) and alpha ({}) must be integers for {} inputs", c.scalar(3).str(), c.scalar(4).str(),
             dtype_name(a.dtype()));
}
std::vector<TensorMeta> addmm_infer(const OpCall& c) {
  check_addmm(c);
  return {contiguous_meta({c.tensor(1).size(0), c.tensor(2).size(1)}, c.tensor(1).dtype())};
}
std::vector<Tensor> addmm_kernel(const OpCall& c) {
  check_addmm(c);
  const Tensor &self = c.tensor(0), &a = c.tensor(1), &b = c.tensor(2);
  Tensor r = batched_product(unsqueeze(a, 0), unsqueeze(b, 0), self, c.scalar(4), c.scalar(3));
  return {view(r, {a.size(0), b.size(1)})};
}
std::vector<Tensor> addmm_vjp(const VjpCall& v) {
  const Tensor &self = v.call.tensor(0), &a = v.call.tensor(1), &b = v.call.tensor(2), &g = v.grads[0];
  const Scalar beta = v.call.scalar(3), alpha = v.call.scalar(4);
  auto scaled = [](const Tensor& t, const Scalar& s) { return s.to_double() == 1.0 ? t : mul(t, s); };
  return {if_needed(v.needs(0), [&] { return sum_to(scaled(g, beta), self.sizes()); }),
          if_needed(v.needs(1), [&] { return scaled(mm(g, transpose(b, 0, 1)), alpha); }),
          if_needed(v.needs(2), [&] { return scaled(mm(transpose(a, 0, 1), g), alpha); })};
}

// ---------------------------------------------------------------- matmul / linear (decompositions)

// torch.matmul: 1-D x 1-D is a dot product (0-dim), a 1-D operand gains a dim that is removed afterwards,
// 2-D x 2-D is mm, an N-D (N >= 3) first operand with a 1-D or 2-D second folds its batch into mm's rows,
// and everything else is bmm over the broadcast batch dims.
std::vector<Tensor> matmul_decomp(const OpCall& c) {
  const Tensor &a = c.tensor(0), &b = c.tensor(1);
  const int64_t da = a.dim(), db = b.dim();
  KILN_CHECK(da >= 1 && db >= 1, "matmul: both arguments need to be at least 1-D, but they are {}-D and {}-D "
             "(shapes {} and {})", da, db, shape_str(a.sizes()), shape_str(b.sizes()));
  const int64_t k = a.size(-1), kb = db == 1 ? b.size(0) : b.size(-2);
  KILN_CHECK(k == kb, "matmul: shapes {} and {} cannot be multiplied: the last dim of the first ({}) must equal "
             "the {} dim of the second ({})", shape_str(a.sizes()), shape_str(b.sizes()), k,
             db == 1 ? "only" : "second-to-last", kb);
  check_product_dtypes("matmul", a, b);
  if (da == 1 && db == 1) return {reshape(mm(unsqueeze(a, 0), unsqueeze(b, 1)), {})};
  if (da == 2 && db == 1) return {reshape(mm(a, unsqueeze(b, 1)), {a.size(0)})};
  if (da == 1 && db == 2) return {reshape(mm(unsqueeze(a, 0), b), {b.size(1)})};
  if (da == 2 && db == 2) return {mm(a, b)};
  if (da >= 3 && db <= 2) {
    Shape out_shape(a.sizes().begin(), a.sizes().end() - 1);
    const int64_t rows = shape_numel(out_shape);
    Tensor r = mm(reshape(a, {rows, k}), db == 1 ? unsqueeze(b, 1) : b);
    if (db == 2) out_shape.push_back(b.size(1));
    return {reshape(r, out_shape)};
  }
  const Tensor a3 = da == 1 ? unsqueeze(a, 0) : a;
  const Tensor b3 = db == 1 ? unsqueeze(b, 1) : b;
  const Shape batch_a(a3.sizes().begin(), a3.sizes().end() - 2), batch_b(b3.sizes().begin(), b3.sizes().end() - 2);
  const Shape batch = broadcast_shapes(batch_a, batch_b, "matmul");
  const int64_t B = shape_numel(batch), m = a3.size(-2), n = b3.size(-1);
  auto batched = [&](const Tensor& t, int64_t rows, int64_t cols) {
    Shape full = batch;
    full.push_back(rows);
    full.push_back(cols);
    return reshape(expand(t, full), {B, rows, cols});
  };
  Tensor r = bmm(batched(a3, m, k), batched(b3, k, n));
  Shape out_shape = batch;
  if (da > 1) out_shape.push_back(m);
  if (db > 1) out_shape.push_back(n);
  return {reshape(r, out_shape)};
}

// x @ w.T + bias (addmm for a 2-D input with bias).
std::vector<Tensor> linear_decomp(const OpCall& c) {
  const Tensor &x = c.tensor(0), &w = c.tensor(1);
  const Tensor bias = c.opt_tensor(2);
  KILN_CHECK(w.dim() == 1 || w.dim() == 2, "linear: weight must be 1-D or 2-D (out_features x in_features), got "
             "shape {} (input {})", shape_str(w.sizes()), shape_str(x.sizes()));
  KILN_CHECK(x.dim() >= 1 && x.size(-1) == w.size(-1), "linear: input of shape {} and weight of shape {} are "
             "incompatible: the input's last dim must equal the weight's in_features ({})", shape_str(x.sizes()),
             shape_str(w.sizes()), w.size(-1));
  const Tensor wt = w.dim() == 2 ? transpose(w, 0, 1) : w;
  if (x.dim() == 2 && w.dim() == 2 && bias.defined()) return {addmm(bias, x, wt)};
  Tensor r = matmul(x, wt);
  return {bias.defined() ? add(r, bias) : r};
}

}  // namespace

void register_linalg_ops() {
  def(OpId::mm).infer(mm_infer).kernel(mm_kernel).vjp(mm_vjp);
  def(OpId::bmm).infer(bmm_infer).kernel(bmm_kernel).vjp(bmm_vjp);
  def(OpId::addmm).infer(addmm_infer).kernel(addmm_kernel).vjp(addmm_vjp);
  def(OpId::matmul).decomp(matmul_decomp);
  def(OpId::linear).decomp(linear_decomp);
}

}  // namespace kiln
