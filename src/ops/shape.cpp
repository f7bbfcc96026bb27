// Views (view, reshape, permute, transpose, expand, slice, select, squeeze, unsqueeze, as_strided, diagonal,
// narrow, flatten, split, chunk) and the copies contiguous/clone/to. A view kernel only computes sizes,
// strides and offset, so it runs unchanged on meta tensors; its infer function is the kernel itself.
#include <algorithm>
#include <numeric>

#include "core/size_math.h"
#include "eager/loops.h"
#include "ops/common.h"
#include "ops/families.h"
#include "ops/storage_checks.h"

namespace kiln {
namespace {

template <KernelFn K>
std::vector<TensorMeta> infer_by_kernel(const OpCall& c) {
  std::vector<TensorMeta> out;
  for (const Tensor& t : K(c)) out.push_back(t.meta());
  return out;
}

// Resolves one -1 in `shape` against numel; checks the product.
Shape infer_size(IntList shape, int64_t numel, std::string_view op) {
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      KILN_CHECK(infer_at < 0, "{}: only one dimension can be -1 in {}", op, shape_str(shape));
      infer_at = int64_t(i);
    } else {
      KILN_CHECK(shape[i] >= 0, "{}: invalid size {} in {}", op, shape[i], shape_str(shape));
      known = checked_mul(known, shape[i], op, kTooManyElements);
    }
  }
  if (infer_at >= 0) {
    KILN_CHECK(known != 0 && numel % known == 0, "{}: shape {} is invalid for an input of {} elements", op,
               shape_str(shape), numel);
    shape[size_t(infer_at)] = numel / known;
  } else {
    KILN_CHECK(known == numel, "{}: shape {} is invalid for an input of {} elements", op, shape_str(shape), numel);
  }
  return shape;
}

// Strides for viewing (sizes, strides) as `shape` without copying, or nullopt (ATen computeStride).
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& shape) {
  if (sizes.empty()) return Shape(shape.size(), 1);
  int64_t numel = shape_numel(sizes);
  if (numel == 0) return contiguous_strides(shape);
  Shape out(shape.size());
  int64_t view_d = int64_t(shape.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = int64_t(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[size_t(d)];
    if (d == 0 || (sizes[size_t(d - 1)] != 1 && strides[size_t(d - 1)] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[size_t(view_d)] == 1)) {
        out[size_t(view_d)] = checked_mul(view_numel, chunk_base_stride, "view", "a stride of the result");
        view_numel *= shape[size_t(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[size_t(d - 1)];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

// ---------------------------------------------------------------- view / reshape
std::vector<Tensor> view_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  Shape shape = infer_size(c.ints(1), x.numel(), "view");
  auto st = view_strides(x.sizes(), x.strides(), shape);
  KILN_CHECK(st.has_value(), "view: cannot view {} with strides {} as {} without copying; use reshape", x.str(),
             shape_str(x.strides()), shape_str(shape));
  return {make_view(x, shape, *st, x.offset())};
}
std::vector<Tensor> view_vjp(const VjpCall& v) { return {reshape(v.grads[0], v.call.tensor(0).sizes())}; }

std::vector<Tensor> reshape_decomp(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  Shape shape = infer_size(c.ints(1), x.numel(), "reshape");
  if (view_strides(x.sizes(), x.strides(), shape)) return {view(x, shape)};
  return {view(clone(x), shape)};
}

// ---------------------------------------------------------------- permute / transpose
std::vector<Tensor> permute_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  const IntList& dims = c.ints(1);
  KILN_CHECK(int64_t(dims.size()) == x.dim(), "permute: {} dims given for a tensor of {} dimensions", dims.size(), x.dim());
  Shape sizes, strides;
  std::vector<bool> seen(size_t(x.dim()), false);
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, x.dim(), "permute");
    KILN_CHECK(!seen[size_t(w)], "permute: dim {} repeats in {}", w, shape_str(dims));
    seen[size_t(w)] = true;
    sizes.push_back(x.sizes()[size_t(w)]);
    strides.push_back(x.strides()[size_t(w)]);
  }
  return {make_view(x, sizes, strides, x.offset())};
}
std::vector<Tensor> permute_vjp(const VjpCall& v) {
  const IntList& dims = v.call.ints(1);
  int64_t n = int64_t(dims.size());
  IntList inv(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) inv[size_t(wrap_dim(dims[size_t(i)], n, "permute"))] = i;
  return {permute(v.grads[0], inv)};
}

std::vector<Tensor> transpose_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  int64_t a = wrap_dim(c.int_(1), x.dim(), "transpose"), b = wrap_dim(c.int_(2), x.dim(), "transpose");
  Shape sizes = x.sizes(), strides = x.strides();
  if (x.dim() > 0) {
    std::swap(sizes[size_t(a)], sizes[size_t(b)]);
    std::swap(strides[size_t(a)], strides[size_t(b)]);
  }
  return {make_view(x, sizes, strides, x.offset())};
}
std::vector<Tensor> transpose_vjp(const VjpCall& v) { return {transpose(v.grads[0], v.call.int_(1), v.call.int_(2))}; }

// ---------------------------------------------------------------- expand
std::vector<Tensor> expand_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  const IntList& size = c.ints(1);
  KILN_CHECK(int64_t(size.size()) >= x.dim(), "expand: the number of sizes ({}) must be at least the tensor's "
             "dimensions ({}) for {}", size.size(), x.dim(), x.str());
  size_t lead = size.size() - size_t(x.dim());
  Shape sizes(size.size()), strides(size.size());
  for (size_t i = 0; i < size.size(); ++i) {
    if (i < lead) {
      KILN_CHECK(size[i] >= 0, "expand: size {} at new leading dim {} must be non-negative", size[i], i);
      sizes[i] = size[i];
      strides[i] = 0;
      continue;
    }
    int64_t have = x.sizes()[i - lead];
    int64_t want = size[i] == -1 ? have : size[i];
    KILN_CHECK(have == want || have == 1, "expand: the size of {} at dim {} is {}, which cannot expand to {} (only "
               "size-1 dims expand); target {}", x.str(), i - lead, have, want, shape_str(size));
    sizes[i] = want;
    strides[i] = have == want ? x.strides()[i - lead] : 0;
  }
  return {make_view(x, sizes, strides, x.offset())};
}
std::vector<Tensor> expand_vjp(const VjpCall& v) { return {sum_to(v.grads[0], v.call.tensor(0).sizes())}; }

// ---------------------------------------------------------------- slice / select / narrow
std::vector<Tensor> slice_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  KILN_CHECK(x.dim() > 0, "slice: cannot slice a 0-dim tensor");
  int64_t d = wrap_dim(c.int_(1), x.dim(), "slice");
  int64_t n = x.sizes()[size_t(d)];
  int64_t step = c.int_(4);
  KILN_CHECK(step > 0, "slice: step must be positive, got {}", step);
  int64_t start = c.opt_int(2).value_or(0), end = c.opt_int(3).value_or(n);
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sizes = x.sizes(), strides = x.strides();
  sizes[size_t(d)] = ceil_div(end - start, step);
  strides[size_t(d)] = checked_mul(strides[size_t(d)], step, "slice", "the stride of the result");
  int64_t offset = checked_add(x.offset(), checked_mul(start, x.strides()[size_t(d)], "slice", "the storage offset"),
                               "slice", "the storage offset");
  return {make_view(x, sizes, strides, offset)};
}
// Scatters `g` into zeros shaped like the input through the same view (the VJP of every view but expand).
Tensor embed_in_zeros(const Tensor& like, const Tensor& g, const std::function<Tensor(const Tensor&)>& same_view) {
  Tensor z = zeros(like.sizes(), g.dtype());
  copy_(same_view(z), g);
  return z;
}
std::vector<Tensor> slice_vjp(const VjpCall& v) {
  const OpCall& c = v.call;
  return {embed_in_zeros(c.tensor(0), v.grads[0], [&](const Tensor& z) {
    return slice(z, c.int_(1), c.opt_int(2), c.opt_int(3), c.int_(4));
  })};
}

std::vector<Tensor> select_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  KILN_CHECK(x.dim() > 0, "select: cannot select from a 0-dim tensor");
  int64_t d = wrap_dim(c.int_(1), x.dim(), "select");
  int64_t n = x.sizes()[size_t(d)], i = c.int_(2);
  KILN_CHECK(i >= -n && i < n, "select: index {} is out of range for dimension {} of size {}", i, d, n);
  if (i < 0) i += n;
  Shape sizes = x.sizes(), strides = x.strides();
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  int64_t offset = checked_add(x.offset(), checked_mul(i, x.strides()[size_t(d)], "select", "the storage offset"),
                               "select", "the storage offset");
  return {make_view(x, sizes, strides, offset)};
}
std::vector<Tensor> select_vjp(const VjpCall& v) {
  const OpCall& c = v.call;
  return {embed_in_zeros(c.tensor(0), v.grads[0], [&](const Tensor& z) { return select(z, c.int_(1), c.int_(2)); })};
}

std::vector<Tensor> narrow_decomp(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  KILN_CHECK(x.dim() > 0, "narrow: cannot narrow a 0-dim tensor");
  int64_t d = wrap_dim(c.int_(1), x.dim(), "narrow");
  int64_t n = x.sizes()[size_t(d)], start = c.int_(2), len = c.int_(3);
  if (start < 0) start += n;
  KILN_CHECK(start >= 0 && start <= n && len >= 0 && len <= n - start, "narrow: start {} + length {} exceeds "
             "dimension {} of size {}", c.int_(2), len, d, n);
  return {slice(x, d, start, start + len, 1)};
}

// ---------------------------------------------------------------- squeeze / unsqueeze
std::vector<Tensor> squeeze_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  std::vector<int64_t> dims = reduction_dims(c.opt_ints(1), x.dim(), "squeeze", false);
  Shape sizes, strides;
  for (int64_t d = 0; d < x.dim(); ++d) {
    bool listed = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (listed && x.sizes()[size_t(d)] == 1) continue;
    sizes.push_back(x.sizes()[size_t(d)]);
    strides.push_back(x.strides()[size_t(d)]);
  }
  return {make_view(x, sizes, strides, x.offset())};
}
std::vector<Tensor> unsqueeze_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  int64_t d = wrap_dim(c.int_(1), x.dim() + 1, "unsqueeze");
  Shape sizes = x.sizes(), strides = x.strides();
  int64_t st = d < x.dim() ? checked_mul(sizes[size_t(d)], strides[size_t(d)], "unsqueeze", "the new stride") : 1;
  sizes.insert(sizes.begin() + d, 1);
  strides.insert(strides.begin() + d, st);
  return {make_view(x, sizes, strides, x.offset())};
}
std::vector<Tensor> reshape_back_vjp(const VjpCall& v) { return {reshape(v.grads[0], v.call.tensor(0).sizes())}; }

// ---------------------------------------------------------------- as_strided / diagonal
std::vector<Tensor> as_strided_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  const IntList &size = c.ints(1), &stride = c.ints(2);
  KILN_CHECK(size.size() == stride.size(), "as_strided: {} sizes but {} strides", size.size(), stride.size());
  int64_t off = c.opt_int(3).value_or(x.offset());
  std::optional<int64_t> capacity;
  if (x.storage()) capacity = storage_capacity(x);
  check_view_in_storage("as_strided", size, stride, off, capacity);
  return {make_view(x, size, stride, off)};
}
// General VJP: scatter-add the gradient by storage position, then gather at the input's positions. Handles
// overlapping outputs (expand-like strides) correctly.
std::vector<Tensor> as_strided_vjp(const VjpCall& v) {
  const OpCall& c = v.call;
  const Tensor& x = c.tensor(0);
  const Tensor& g = v.grads[0];
  const IntList &size = c.ints(1), &stride = c.ints(2);
  int64_t off = c.opt_int(3).value_or(x.offset());
  auto extent_of = [](const Shape& sz, const Shape& st, int64_t o) {
    int64_t e = o + 1;
    for (size_t i = 0; i < sz.size(); ++i) {
      if (sz[i] == 0) return int64_t(0);
      e += (sz[i] - 1) * st[i];
    }
    return e;
  };
  int64_t extent = std::max(extent_of(size, stride, off), extent_of(x.sizes(), x.strides(), x.offset()));
  Tensor positions = arange(0, std::max<int64_t>(extent, 1), 1, DType::I64);
  Tensor out_pos = reshape(as_strided(positions, size, stride, off), {-1});
  Tensor in_pos = reshape(as_strided(positions, x.sizes(), x.strides(), x.offset()), {-1});
  Tensor flat = zeros({std::max<int64_t>(extent, 1)}, g.dtype());
  flat = index_put(flat, {out_pos}, reshape(g, {-1}), true);
  return {reshape(index(flat, {in_pos}), x.sizes())};
}

std::vector<Tensor> diagonal_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  KILN_CHECK(x.dim() >= 2, "diagonal: needs a tensor of at least 2 dimensions, got {}", x.str());
  int64_t off = c.int_(1);
  int64_t d1 = wrap_dim(c.int_(2), x.dim(), "diagonal"), d2 = wrap_dim(c.int_(3), x.dim(), "diagonal");
  KILN_CHECK(d1 != d2, "diagonal: dim1 and dim2 must differ, both are {}", d1);
  int64_t n1 = x.sizes()[size_t(d1)], n2 = x.sizes()[size_t(d2)];
  int64_t len = off >= 0 ? std::max<int64_t>(std::min(n1, n2 - off), 0) : std::max<int64_t>(std::min(n1 + off, n2), 0);
  int64_t start = x.offset();
  if (len > 0)  // then |off| < the dim's size, so -off does not overflow
    start = checked_add(start, off >= 0 ? checked_mul(off, x.strides()[size_t(d2)], "diagonal", "the storage offset")
                                        : checked_mul(-off, x.strides()[size_t(d1)], "diagonal", "the storage offset"),
                        "diagonal", "the storage offset");
  Shape sizes, strides;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d == d1 || d == d2) continue;
    sizes.push_back(x.sizes()[size_t(d)]);
    strides.push_back(x.strides()[size_t(d)]);
  }
  sizes.push_back(len);
  strides.push_back(checked_add(x.strides()[size_t(d1)], x.strides()[size_t(d2)], "diagonal", "the stride of the result"));
  return {make_view(x, sizes, strides, start)};
}
std::vector<Tensor> diagonal_vjp(const VjpCall& v) {
  const OpCall& c = v.call;
  return {embed_in_zeros(c.tensor(0), v.grads[0], [&](const Tensor& z) {
    return diagonal(z, c.int_(1), c.int_(2), c.int_(3));
  })};
}

// ---------------------------------------------------------------- flatten / split / chunk
std::vector<Tensor> flatten_decomp(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  if (x.dim() == 0) return {reshape(x, {1})};
  int64_t s = wrap_dim(c.int_(1), x.dim(), "flatten"), e = wrap_dim(c.int_(2), x.dim(), "flatten");
  KILN_CHECK(s <= e, "flatten: start_dim {} must not come after end_dim {}", s, e);
  IntList shape;
  for (int64_t d = 0; d < s; ++d) shape.push_back(x.sizes()[size_t(d)]);
  int64_t m = 1;
  for (int64_t d = s; d <= e; ++d) m *= x.sizes()[size_t(d)];
  shape.push_back(m);
  for (int64_t d = e + 1; d < x.dim(); ++d) shape.push_back(x.sizes()[size_t(d)]);
  return {reshape(x, shape)};
}

std::vector<Tensor> split_decomp(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  KILN_CHECK(x.dim() > 0, "split: cannot split a 0-dim tensor");
  int64_t d = wrap_dim(c.int_(2), x.dim(), "split");
  int64_t size = c.int_(1), n = x.sizes()[size_t(d)];
  KILN_CHECK(size > 0 || (size == 0 && n == 0), "split: split_size must be positive, got {}", size);
  std::vector<Tensor> out;
  if (n == 0) return {x};
  for (int64_t s = 0; s < n; s += size) out.push_back(narrow(x, d, s, std::min(size, n - s)));
  return out;
}
std::vector<Tensor> chunk_decomp(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  KILN_CHECK(x.dim() > 0, "chunk: cannot chunk a 0-dim tensor");
  int64_t chunks = c.int_(1);
  KILN_CHECK(chunks > 0, "chunk: the number of chunks must be positive, got {}", chunks);
  int64_t d = wrap_dim(c.int_(2), x.dim(), "chunk");
  int64_t n = x.sizes()[size_t(d)];
  int64_t size = std::max<int64_t>(ceil_div(n, chunks), 1);
  return split(x, size, d);
}

// ---------------------------------------------------------------- copies
std::vector<Tensor> clone_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  Tensor out = Tensor::empty(x.sizes(), x.dtype());
  copy_into(out, x);
  return {out};
}
std::vector<TensorMeta> clone_infer(const OpCall& c) { return {contiguous_meta(c.tensor(0).sizes(), c.tensor(0).dtype())}; }
std::vector<Tensor> contiguous_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  if (x.is_contiguous()) return {x};
  return clone_kernel(c);
}
std::vector<TensorMeta> contiguous_infer(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  return {x.is_contiguous() ? x.meta() : contiguous_meta(x.sizes(), x.dtype())};
}
std::vector<Tensor> identity_vjp(const VjpCall& v) { return {v.grads[0]}; }

// detach: the same elements without history (not differentiable: the dispatcher records none for it).
std::vector<Tensor> detach_kernel(const OpCall& c) { return {history_free_alias(c.tensor(0))}; }

std::vector<Tensor> to_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  if (x.dtype() == c.dtype(1)) return {x};
  Tensor out = Tensor::empty(x.sizes(), c.dtype(1));
  copy_into(out, x);
  return {out};
}
std::vector<TensorMeta> to_infer(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  return {x.dtype() == c.dtype(1) ? x.meta() : contiguous_meta(x.sizes(), c.dtype(1))};
}
std::vector<Tensor> to_vjp(const VjpCall& v) { return {to(v.grads[0], v.call.tensor(0).dtype())}; }

}  // namespace

void register_shape_ops() {
  def(OpId::view).infer(infer_by_kernel<view_kernel>).kernel(view_kernel).vjp(view_vjp);
  def(OpId::reshape).decomp(reshape_decomp);
  def(OpId::permute).infer(infer_by_kernel<permute_kernel>).kernel(permute_kernel).vjp(permute_vjp);
  def(OpId::transpose).infer(infer_by_kernel<transpose_kernel>).kernel(transpose_kernel).vjp(transpose_vjp);
  def(OpId::expand).infer(infer_by_kernel<expand_kernel>).kernel(expand_kernel).vjp(expand_vjp);
  def(OpId::slice).infer(infer_by_kernel<slice_kernel>).kernel(slice_kernel).vjp(slice_vjp);
  def(OpId::select).infer(infer_by_kernel<select_kernel>).kernel(select_kernel).vjp(select_vjp);
  def(OpId::squeeze).infer(infer_by_kernel<squeeze_kernel>).kernel(squeeze_kernel).vjp(reshape_back_vjp);
  def(OpId::unsqueeze).infer(infer_by_kernel<unsqueeze_kernel>).kernel(unsqueeze_kernel).vjp(reshape_back_vjp);
  def(OpId::as_strided).infer(infer_by_kernel<as_strided_kernel>).kernel(as_strided_kernel).vjp(as_strided_vjp);
  def(OpId::diagonal).infer(infer_by_kernel<diagonal_kernel>).kernel(diagonal_kernel).vjp(diagonal_vjp);
  def(OpId::detach).infer(infer_by_kernel<detach_kernel>).kernel(detach_kernel);
  def(OpId::narrow).decomp(narrow_decomp);
  def(OpId::flatten).decomp(flatten_decomp);
  def(OpId::split).decomp(split_decomp);
  def(OpId::chunk).decomp(chunk_decomp);
  def(OpId::contiguous).infer(contiguous_infer).kernel(contiguous_kernel).vjp(identity_vjp);
  def(OpId::clone).infer(clone_infer).kernel(clone_kernel).vjp(identity_vjp);
  def(OpId::to).infer(to_infer).kernel(to_kernel).vjp(to_vjp);
}

}  // namespace kiln
