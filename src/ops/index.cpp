// Data movement: cat, stack, repeat, flip, roll, tril, triu, pad, index_select, gather, scatter(_add), index,
// index_put, embedding. The copies (cat, repeat, flip, constant pad) are strided views fed to copy_into.
// Everything that follows index tensors (and reflect/replicate/circular pad) goes through one engine: an i64
// tensor of element offsets built (and bounds-checked) from the index tensors, then a strided loop moving
// elements through it (gather, put or accumulate).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>

#include "core/size_math.h"
#include "eager/loops.h"
#include "ops/common.h"
#include "ops/families.h"

namespace kiln {
namespace {

// ATen's ensure_nonempty: a 0-dim tensor is treated as shape [1] by gather/scatter.
Shape nonempty_sizes(const Tensor& t) { return t.dim() == 0 ? Shape{1} : t.sizes(); }
Shape nonempty_strides(const Tensor& t) { return t.dim() == 0 ? Shape{1} : t.strides(); }

Tensor contiguous_copy(const Tensor& x) {
  Tensor out = Tensor::empty(x.sizes(), x.dtype());
  copy_into(out, x);
  return out;
}

void check_integer_index(const Tensor& index, std::string_view op, std::string_view what) {
  KILN_CHECK(index.dtype() == DType::I64 || index.dtype() == DType::I32,
             "{}: expected {} to be an int64 or int32 tensor, got {}", op, what, index.str());
}

// ---------------------------------------------------------------- the indexing engine

// One indexed dimension: the index tensor (i64 or i32, broadcast over the iteration shape), the size of the
// dimension it indexes, and the stride that turns an index into an element offset.
struct IndexedDim {
  Tensor index;
  int64_t dim;
  int64_t size;
  int64_t stride;
};

// offsets[p] = sum over `parts` of index[p] * stride, for every position p of `shape`. Negative indices wrap
// when `wrap_negative` (advanced indexing) and are errors otherwise (index_select, gather, scatter).
Tensor index_offsets(const std::vector<IndexedDim>& parts, const Shape& shape, bool wrap_negative, std::string_view op) {
  Tensor offs = Tensor::empty(shape, DType::I64);
  if (offs.numel() == 0) return offs;
  int64_t* po = offs.data<int64_t>();
  for (size_t k = 0; k < parts.size(); ++k) {
    const IndexedDim& part = parts[k];
    const bool first = k == 0;  // the first part assigns, the others add
    std::atomic<bool> bad{false};
    std::atomic<int64_t> bad_value{0};
    StridedIter<2> it(shape, {offs.strides(), broadcast_strides(part.index, shape)});
    auto accumulate = [&](auto type_tag) {
      using I = decltype(type_tag);
      const I* pi = static_cast<const I*>(part.index.data_ptr());
      it.run([&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
        int64_t* o = po + off[0];
        const I* x = pi + off[1];
        for (int64_t i = 0; i < n; ++i) {
          int64_t v = int64_t(x[i * st[1]]);
          if (v < 0 && wrap_negative) v += part.size;
          if (v < 0 || v >= part.size) {
            if (!bad.exchange(true)) bad_value = int64_t(x[i * st[1]]);
            continue;
          }
          if (first) o[i * st[0]] = v * part.stride;
          else o[i * st[0]] += v * part.stride;
        }
      });
    };
    if (part.index.dtype() == DType::I32) accumulate(int32_t{});
    else accumulate(int64_t{});
    if (bad) {
      if (part.size == 0) fail("{}: index {} is out of bounds for dimension {} with size 0 (no index is valid)", op, bad_value.load(), part.dim);
      fail("{}: index {} is out of bounds for dimension {} with size {} (valid indices: {} to {})", op,
           bad_value.load(), part.dim, part.size, wrap_negative ? -part.size : 0, part.size - 1);
    }
  }
  return offs;
}

enum class Move { Gather, Put, Accumulate };

// Moves elements over `shape`, each operand addressed by its own strides (dst and src share a dtype):
//   Gather:     dst[p] = src[p + offsets[p]]
//   Put:        dst[p + offsets[p]] = src[p]
//   Accumulate: dst[p + offsets[p]] += src[p]
// Put and Accumulate run serially in row-major order, so duplicate targets resolve deterministically (the last
// write wins; sums add up in order, rounding after every add like PyTorch's CPU kernels).
void move_indexed(Move mode, const Tensor& dst, const Shape& dst_strides, const Tensor& src, const Shape& src_strides,
                  const Tensor& offs, const Shape& offs_strides, const Shape& shape) {
  if (shape_numel(shape) == 0) return;
  StridedIter<3> it(shape, {dst_strides, src_strides, offs_strides});
  const int64_t* po = offs.data<int64_t>();
  KILN_DISPATCH_ALL(dst.dtype(), [&](auto type_tag) {
    using T = decltype(type_tag);
    T* pd = static_cast<T*>(dst.data_ptr());
    const T* ps = static_cast<const T*>(src.data_ptr());
    auto row = [&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
      T* d = pd + off[0];
      const T* s = ps + off[1];
      const int64_t* o = po + off[2];
      if (mode == Move::Gather) {
        if (st[2] == 0) {  // one offset for the whole row (e.g. index_select of rows)
          const T* s0 = s + *o;
          if (st[0] == 1 && st[1] == 1) {
            for (int64_t i = 0; i < n; ++i) d[i] = s0[i];
          } else {
            for (int64_t i = 0; i < n; ++i) d[i * st[0]] = s0[i * st[1]];
          }
        } else {
          for (int64_t i = 0; i < n; ++i) d[i * st[0]] = s[i * st[1] + o[i * st[2]]];
        }
      } else if (mode == Move::Put) {
        for (int64_t i = 0; i < n; ++i) d[i * st[0] + o[i * st[2]]] = s[i * st[1]];
      } else {
        for (int64_t i = 0; i < n; ++i) {
          T& t = d[i * st[0] + o[i * st[2]]];
          if constexpr (std::is_same_v<T, bool>) t = t || s[i * st[1]];
          else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) t = T(float(t) + float(s[i * st[1]]));
          else t = T(t + s[i * st[1]]);
        }
      }
    };
    if (mode == Move::Gather) it.run(row);
    else it.for_range(0, it.numel(), row);
  });
}

// ---------------------------------------------------------------- advanced indexing (index, index_put)

bool is_mask(const Tensor& t) { return t.dtype() == DType::Bool || t.dtype() == DType::U8; }

void check_index_types(const OptTensorList& indices, std::string_view op) {
  for (const Tensor& t : indices)
    KILN_CHECK(!t.defined() || t.dtype() == DType::I64 || t.dtype() == DType::I32 || is_mask(t),
               "{}: tensors used as indices must be int64, int32, bool or uint8 tensors, got {}", op, t.str());
}

// The coordinates of the true elements of `mask` (ATen nonzero), one i64 tensor per mask dimension.
std::vector<Tensor> mask_coordinates(const Tensor& mask) {
  Tensor m = as_contiguous_dtype(mask, DType::Bool);
  const bool* p = m.data<bool>();
  const int64_t n = m.numel(), k = m.dim();
  int64_t count = std::count(p, p + n, true);
  std::vector<Tensor> coords;
  std::vector<int64_t*> out;
  for (int64_t j = 0; j < k; ++j) {
    coords.push_back(Tensor::empty({count}, DType::I64));
    out.push_back(coords.back().data<int64_t>());
  }
  Shape pos(size_t(k), 0);
  for (int64_t i = 0, c = 0; i < n; ++i) {
    if (p[i]) {
      for (int64_t j = 0; j < k; ++j) out[size_t(j)][c] = pos[size_t(j)];
      ++c;
    }
    for (int64_t j = k - 1; j >= 0 && ++pos[size_t(j)] == m.sizes()[size_t(j)]; --j) pos[size_t(j)] = 0;
  }
  return coords;
}

// One entry per dim of `self` (undefined = full slice): bool/uint8 masks become the integer coordinates of their
// true elements (one tensor per mask dim), then the list is padded with full slices.
std::vector<Tensor> expand_indices(const Shape& self_sizes, const OptTensorList& indices, std::string_view op) {
  const int64_t ndim = int64_t(self_sizes.size());
  check_index_types(indices, op);
  KILN_CHECK(int64_t(indices.size()) <= ndim, "{}: too many indices for tensor of dimension {} (got {})", op, ndim,
             indices.size());
  std::vector<Tensor> out;
  for (const Tensor& t : indices) {
    if (!t.defined() || !is_mask(t)) {
      out.push_back(t);
      continue;
    }
    KILN_CHECK(t.dim() > 0, "{}: a 0-dim bool index is not supported (index with a 1-dim mask instead)", op);
    int64_t at = int64_t(out.size());
    KILN_CHECK(at + t.dim() <= ndim, "{}: too many indices for tensor of dimension {} (the mask {} at dimension {} "
               "covers {} dimensions)", op, ndim, t.str(), at, t.dim());
    for (int64_t j = 0; j < t.dim(); ++j)
      KILN_CHECK(t.sizes()[size_t(j)] == self_sizes[size_t(at + j)], "{}: the shape of the mask {} at index {} does "
                 "not match the shape of the indexed tensor {} at index {}", op, shape_str(t.sizes()), j,
                 shape_str(self_sizes), at + j);
    for (Tensor& c : mask_coordinates(t)) out.push_back(c);
  }
  out.resize(size_t(ndim));
  return out;
}

// Where the result of advanced indexing puts its dims: the broadcast index shape replaces the indexed dims in
// place when they are adjacent, and goes first otherwise (NumPy's rule); the other dims keep their order.
struct IndexPlan {
  std::vector<int64_t> dims;  // indexed dims of self
  std::vector<Tensor> index;  // their integer index tensors
  std::vector<int64_t> rest;  // the other dims of self, in order
  Shape broadcast;            // broadcast shape of the index tensors
  int64_t first = 0;          // where the broadcast dims start in the result
  Shape result;
};

IndexPlan plan_index(const Shape& self_sizes, const std::vector<Tensor>& expanded, std::string_view op) {
  IndexPlan p;
  for (int64_t d = 0; d < int64_t(expanded.size()); ++d) {
    if (expanded[size_t(d)].defined()) {
      p.dims.push_back(d);
      p.index.push_back(expanded[size_t(d)]);
    } else {
      p.rest.push_back(d);
    }
  }
  KILN_CHECK(!p.dims.empty(), "{}: at least one index must be a tensor (got only None entries)", op);
  std::string shapes;
  for (const Tensor& t : p.index) shapes += (shapes.empty() ? "" : ", ") + shape_str(t.sizes());
  try {
    for (const Tensor& t : p.index) p.broadcast = broadcast_shapes(p.broadcast, t.sizes(), op);
  } catch (const Error&) {
    fail("{}: shape mismatch: indexing tensors could not be broadcast together with shapes {}", op, shapes);
  }
  bool adjacent = p.dims.back() - p.dims.front() + 1 == int64_t(p.dims.size());
  p.first = adjacent ? p.dims.front() : 0;
  for (int64_t r = 0; r < p.first; ++r) p.result.push_back(self_sizes[size_t(p.rest[size_t(r)])]);
  p.result.insert(p.result.end(), p.broadcast.begin(), p.broadcast.end());
  for (size_t r = size_t(p.first); r < p.rest.size(); ++r) p.result.push_back(self_sizes[size_t(p.rest[r])]);
  return p;
}

// Strides over the result shape of a tensor shaped like self with strides `base`: its own strides on the
// non-indexed dims, 0 on the broadcast index dims (the offsets carry those).
Shape base_strides_over_result(const IndexPlan& p, const Shape& base) {
  Shape st;
  for (int64_t r = 0; r < p.first; ++r) st.push_back(base[size_t(p.rest[size_t(r)])]);
  st.insert(st.end(), p.broadcast.size(), 0);
  for (size_t r = size_t(p.first); r < p.rest.size(); ++r) st.push_back(base[size_t(p.rest[r])]);
  return st;
}
// Strides over the result shape of the (contiguous, broadcast-shaped) offsets tensor.
Shape offset_strides_over_result(const IndexPlan& p) {
  Shape st(p.result.size(), 0);
  Shape inner = contiguous_strides(p.broadcast);
  std::copy(inner.begin(), inner.end(), st.begin() + p.first);
  return st;
}

Tensor plan_offsets(const IndexPlan& p, const Shape& self_sizes, const Shape& base_strides, std::string_view op) {
  std::vector<IndexedDim> parts;
  for (size_t k = 0; k < p.dims.size(); ++k) {
    int64_t d = p.dims[k];
    parts.push_back({p.index[k], d, self_sizes[size_t(d)], base_strides[size_t(d)]});
  }
  return index_offsets(parts, p.broadcast, /*wrap_negative=*/true, op);
}

std::vector<TensorMeta> index_infer(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  check_index_types(c.tensors(1), "index");
  for (const Tensor& t : c.tensors(1))
    KILN_CHECK(!t.defined() || !is_mask(t), "index: the output shape depends on the data: the bool mask index {} "
               "selects a data-dependent number of elements, so shape inference cannot run without its values", t.str());
  IndexPlan p = plan_index(x.sizes(), expand_indices(x.sizes(), c.tensors(1), "index"), "index");
  return {contiguous_meta(p.result, x.dtype())};
}
std::vector<Tensor> index_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  IndexPlan p = plan_index(x.sizes(), expand_indices(x.sizes(), c.tensors(1), "index"), "index");
  Tensor offs = plan_offsets(p, x.sizes(), x.strides(), "index");
  Tensor out = Tensor::empty(p.result, x.dtype());
  move_indexed(Move::Gather, out, out.strides(), x, base_strides_over_result(p, x.strides()), offs,
               offset_strides_over_result(p), p.result);
  return {out};
}
std::vector<Tensor> index_vjp(const VjpCall& v) {
  const Tensor& x = v.call.tensor(0);
  const OptTensorList& indices = v.call.tensors(1);
  std::vector<Tensor> grads(1 + indices.size());
  if (v.needs(0)) grads[0] = index_put(zeros(x.sizes(), v.grads[0].dtype()), indices, v.grads[0], true);
  return grads;
}

void check_index_put_values(const Tensor& self, const Tensor& values) {
  KILN_CHECK(values.is_wrapped_number() || values.dtype() == self.dtype(),
             "index_put: values must have the destination's dtype: got {} values for a {} tensor (convert them with to())",
             dtype_name(values.dtype()), dtype_name(self.dtype()));
}
void check_values_fit(const Tensor& values, const Shape& result) {
  bool fits = values.dim() <= int64_t(result.size());
  for (int64_t i = 1; fits && i <= values.dim(); ++i) {
    int64_t v = values.sizes()[size_t(values.dim() - i)], r = result[result.size() - size_t(i)];
    fits = v == r || v == 1;
  }
  KILN_CHECK(fits, "index_put: shape mismatch: value tensor of shape {} cannot be broadcast to indexing result of shape {}",
             shape_str(values.sizes()), shape_str(result));
}

std::vector<TensorMeta> index_put_infer(const OpCall& c) {
  const Tensor &x = c.tensor(0), &values = c.tensor(2);
  const OptTensorList& indices = c.tensors(1);
  check_index_put_values(x, values);
  check_index_types(indices, "index_put");
  bool masked = std::any_of(indices.begin(), indices.end(), [](const Tensor& t) { return t.defined() && is_mask(t); });
  if (!masked) check_values_fit(values, plan_index(x.sizes(), expand_indices(x.sizes(), indices, "index_put"), "index_put").result);
  return {contiguous_meta(x.sizes(), x.dtype())};
}
std::vector<Tensor> index_put_kernel(const OpCall& c) {
  const Tensor &x = c.tensor(0), &values = c.tensor(2);
  check_index_put_values(x, values);
  IndexPlan p = plan_index(x.sizes(), expand_indices(x.sizes(), c.tensors(1), "index_put"), "index_put");
  check_values_fit(values, p.result);
  Tensor out = contiguous_copy(x);
  Tensor offs = plan_offsets(p, x.sizes(), out.strides(), "index_put");
  Tensor vals = values.dtype() == x.dtype() ? values : as_contiguous_dtype(values, x.dtype());
  move_indexed(c.bool_(3) ? Move::Accumulate : Move::Put, out, base_strides_over_result(p, out.strides()), vals,
               broadcast_strides(vals, p.result), offs, offset_strides_over_result(p), p.result);
  return {out};
}
std::vector<Tensor> index_put_vjp(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  const OptTensorList& indices = v.call.tensors(1);
  const Tensor& values = v.call.tensor(2);
  bool accumulate = v.call.bool_(3);
  std::vector<Tensor> grads(2 + indices.size());
  if (v.needs(0)) grads[0] = accumulate ? g : index_put(g, indices, 0.0, false);
  if (v.needs(int(grads.size()) - 1)) grads.back() = sum_to(index(g, indices), values.sizes());
  return grads;
}

// ---------------------------------------------------------------- index_select

// index_select's index as a 1-D tensor (a 0-dim index selects one position and keeps the dim).
Tensor index_as_vector(const Tensor& index) {
  return index.dim() == 1 ? index : make_view(index, {1}, {1}, index.offset());
}

std::vector<TensorMeta> index_select_infer(const OpCall& c) {
  const Tensor &x = c.tensor(0), &index = c.tensor(2);
  KILN_CHECK(index.dim() <= 1, "index_select: index must be a 1-D or 0-D tensor, got {}", index.str());
  check_integer_index(index, "index_select", "index");
  int64_t d = wrap_dim(c.int_(1), x.dim(), "index_select");
  if (x.dim() == 0) {
    KILN_CHECK(index.numel() == 1, "index_select: an index into a 0-dim tensor must hold exactly one value, got {}",
               index.numel());
    return {contiguous_meta({}, x.dtype())};
  }
  Shape sizes = x.sizes();
  sizes[size_t(d)] = index.numel();
  return {contiguous_meta(sizes, x.dtype())};
}
std::vector<Tensor> index_select_kernel(const OpCall& c) {
  const Tensor &x = c.tensor(0), &index = c.tensor(2);
  TensorMeta m = index_select_infer(c)[0];
  Tensor out = Tensor::empty(m.sizes, m.dtype);
  if (x.dim() == 0) {
    index_offsets({{index_as_vector(index), 0, 1, 0}}, {1}, false, "index_select");
    copy_into(out, x);
    return {out};
  }
  int64_t d = wrap_dim(c.int_(1), x.dim(), "index_select");
  Tensor offs = index_offsets({{index_as_vector(index), d, x.sizes()[size_t(d)], x.strides()[size_t(d)]}},
                              {index.numel()}, /*wrap_negative=*/false, "index_select");
  Shape src_strides = x.strides(), offs_strides(size_t(x.dim()), 0);
  src_strides[size_t(d)] = 0;
  offs_strides[size_t(d)] = 1;
  move_indexed(Move::Gather, out, out.strides(), x, src_strides, offs, offs_strides, out.sizes());
  return {out};
}
std::vector<Tensor> index_select_vjp(const VjpCall& v) {
  const Tensor &x = v.call.tensor(0), &index = v.call.tensor(2);
  const Tensor& g = v.grads[0];
  if (!v.needs(0)) return {Tensor(), Tensor()};
  if (x.dim() == 0) return {g, Tensor()};
  int64_t d = wrap_dim(v.call.int_(1), x.dim(), "index_select");
  OptTensorList indices(size_t(d) + 1);
  indices[size_t(d)] = index.dim() == 1 ? index : reshape(index, {1});
  return {index_put(zeros(x.sizes(), g.dtype()), indices, g, true), Tensor()};
}

// ---------------------------------------------------------------- gather / scatter / scatter_add

// ATen's gather_shape_check and scatter_shape_check (skipped, like the dtype check, for an empty index).
void check_gather_scatter(std::string_view op, const Tensor& self, int64_t d, const Tensor& index, const Tensor* src) {
  if (index.numel() == 0) return;
  check_integer_index(index, op, "index");
  const Shape ss = nonempty_sizes(self), is = nonempty_sizes(index);
  KILN_CHECK(ss.size() == is.size(), "{}: index tensor must have the same number of dimensions as the input tensor "
             "(index {}, input {})", op, shape_str(index.sizes()), shape_str(self.sizes()));
  for (size_t i = 0; i < ss.size(); ++i)
    KILN_CHECK(int64_t(i) == d || is[i] <= ss[i], "{}: size does not match at dimension {}: expected index {} to be no "
               "larger than input {} apart from dimension {}", op, i, shape_str(index.sizes()), shape_str(self.sizes()), d);
  if (!src) return;
  const Shape rs = nonempty_sizes(*src);
  KILN_CHECK(rs.size() == is.size(), "{}: index tensor must have the same number of dimensions as the src tensor "
             "(index {}, src {})", op, shape_str(index.sizes()), shape_str(src->sizes()));
  for (size_t i = 0; i < rs.size(); ++i)
    KILN_CHECK(is[i] <= rs[i], "{}: expected index {} to be no larger than src {} (dimension {})", op,
               shape_str(index.sizes()), shape_str(src->sizes()), i);
}

std::vector<TensorMeta> gather_infer(const OpCall& c) {
  const Tensor &x = c.tensor(0), &index = c.tensor(2);
  check_gather_scatter("gather", x, wrap_dim(c.int_(1), x.dim(), "gather"), index, nullptr);
  return {contiguous_meta(index.sizes(), x.dtype())};
}
std::vector<Tensor> gather_kernel(const OpCall& c) {
  const Tensor &x = c.tensor(0), &index = c.tensor(2);
  int64_t d = wrap_dim(c.int_(1), x.dim(), "gather");
  check_gather_scatter("gather", x, d, index, nullptr);
  Tensor out = Tensor::empty(index.sizes(), x.dtype());
  if (index.numel() == 0) return {out};
  Shape shape = nonempty_sizes(index), src_strides = nonempty_strides(x);
  Tensor offs = index_offsets({{index, d, nonempty_sizes(x)[size_t(d)], src_strides[size_t(d)]}}, shape, false, "gather");
  src_strides[size_t(d)] = 0;
  move_indexed(Move::Gather, out, contiguous_strides(shape), x, src_strides, offs, contiguous_strides(shape), shape);
  return {out};
}
std::vector<Tensor> gather_vjp(const VjpCall& v) {
  const Tensor& x = v.call.tensor(0);
  return {if_needed(v.needs(0), [&] {
            return scatter_add(zeros(x.sizes(), v.grads[0].dtype()), v.call.int_(1), v.call.tensor(2), v.grads[0]);
          }),
          Tensor()};
}

// scatter (`add` false) and scatter_add: a copy of self with src's elements written (or added) at index.
Tensor scatter_impl(const OpCall& c, bool add) {
  const Tensor &x = c.tensor(0), &index = c.tensor(2), &src = c.tensor(3);
  std::string_view op = add ? "scatter_add" : "scatter";
  int64_t d = wrap_dim(c.int_(1), x.dim(), op);
  bool value_mode = src.is_wrapped_number();
  KILN_CHECK(!(add && value_mode), "scatter_add: src must be a tensor, got the number {}", src.item().str());
  KILN_CHECK(value_mode || src.dtype() == x.dtype(), "{}: expected self.dtype to be equal to src.dtype, got {} and {}",
             op, dtype_name(x.dtype()), dtype_name(src.dtype()));
  check_gather_scatter(op, x, d, index, value_mode ? nullptr : &src);
  Tensor out = contiguous_copy(x);
  if (index.numel() == 0) return out;
  Shape shape = nonempty_sizes(index), dst_strides = nonempty_strides(out);
  Tensor offs = index_offsets({{index, d, nonempty_sizes(out)[size_t(d)], dst_strides[size_t(d)]}}, shape, false, op);
  dst_strides[size_t(d)] = 0;
  Tensor vals = value_mode ? as_contiguous_dtype(src, x.dtype()) : src;
  Shape src_strides = value_mode ? Shape(shape.size(), 0) : nonempty_strides(src);
  move_indexed(add ? Move::Accumulate : Move::Put, out, dst_strides, vals, src_strides, offs, contiguous_strides(shape), shape);
  return out;
}
std::vector<TensorMeta> scatter_infer(const OpCall& c) {
  const Tensor &x = c.tensor(0), &src = c.tensor(3);
  bool add = c.op->id == OpId::scatter_add;
  std::string_view op = add ? "scatter_add" : "scatter";
  KILN_CHECK(src.is_wrapped_number() || src.dtype() == x.dtype(),
             "{}: expected self.dtype to be equal to src.dtype, got {} and {}", op, dtype_name(x.dtype()), dtype_name(src.dtype()));
  check_gather_scatter(op, x, wrap_dim(c.int_(1), x.dim(), op), c.tensor(2), src.is_wrapped_number() ? nullptr : &src);
  return {contiguous_meta(x.sizes(), x.dtype())};
}
std::vector<Tensor> scatter_kernel(const OpCall& c) { return {scatter_impl(c, false)}; }
std::vector<Tensor> scatter_add_kernel(const OpCall& c) { return {scatter_impl(c, true)}; }

// The gradient of scatter's src: the output gradient gathered at index, zero-padded to src's extent (src may
// be larger than index; its elements outside index's extent are never read).
Tensor scatter_src_grad(const Tensor& g, int64_t dim, const Tensor& index, const Tensor& src) {
  if (index.numel() == 0) return zeros(src.sizes(), g.dtype());
  Tensor r = gather(g, dim, index);
  if (r.sizes() == src.sizes()) return r;
  if (src.dim() == 0) return reshape(r, {});
  if (index.dim() == 0) r = reshape(r, {1});
  IntList pads;
  for (int64_t i = src.dim() - 1; i >= 0; --i) {
    pads.push_back(0);
    pads.push_back(src.sizes()[size_t(i)] - r.sizes()[size_t(i)]);
  }
  return pad(r, pads);
}
std::vector<Tensor> scatter_vjp(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  int64_t d = v.call.int_(1);
  const Tensor &index = v.call.tensor(2), &src = v.call.tensor(3);
  return {if_needed(v.needs(0), [&] { return scatter(g, d, index, 0.0); }), Tensor(),
          if_needed(v.needs(2) && !src.is_wrapped_number(), [&] { return scatter_src_grad(g, d, index, src); })};
}
std::vector<Tensor> scatter_add_vjp(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  return {if_needed(v.needs(0), [&] { return g; }), Tensor(),
          if_needed(v.needs(2), [&] { return scatter_src_grad(g, v.call.int_(1), v.call.tensor(2), v.call.tensor(3)); })};
}

// ---------------------------------------------------------------- embedding

Shape embedding_shape(const Tensor& weight, const Tensor& indices) {
  KILN_CHECK(weight.dim() == 2, "embedding: 'weight' must be 2-D, got {}", weight.str());
  check_integer_index(indices, "embedding", "indices");
  Shape s = indices.sizes();
  s.push_back(weight.sizes()[1]);
  return s;
}
std::vector<TensorMeta> embedding_infer(const OpCall& c) {
  return {contiguous_meta(embedding_shape(c.tensor(0), c.tensor(1)), c.tensor(0).dtype())};
}
std::vector<Tensor> embedding_kernel(const OpCall& c) {
  const Tensor &weight = c.tensor(0), &indices = c.tensor(1);
  Shape shape = embedding_shape(weight, indices);
  return {reshape(index_select(weight, 0, reshape(indices, {indices.numel()})), shape)};
}
bool padding_row_exists(const Tensor& weight, int64_t padding_idx) {
  return padding_idx >= 0 && padding_idx < weight.sizes()[0];
}
// The rows of `padding_idx` get no gradient (ATen compares each index with padding_idx; -1 means none).
std::vector<Tensor> embedding_vjp(const VjpCall& v) {
  const Tensor &weight = v.call.tensor(0), &indices = v.call.tensor(1);
  const Tensor& g = v.grads[0];
  int64_t padding_idx = v.call.int_(2);
  if (!v.needs(0)) return {Tensor(), Tensor()};
  Tensor rows = reshape(g, {indices.numel(), weight.sizes()[1]});
  Tensor gw = index_put(zeros(weight.sizes(), g.dtype()), {reshape(indices, {indices.numel()})}, rows, true);
  if (padding_row_exists(weight, padding_idx)) gw = index_put(gw, {full({1}, padding_idx, DType::I64)}, 0.0, false);
  return {gw, Tensor()};
}
// The same in other ops: the padding row is rewritten with its own (detached) values, so its values are kept
// and index_put's VJP gives it no gradient.
std::vector<Tensor> embedding_decomp(const OpCall& c) {
  const Tensor &weight = c.tensor(0), &indices = c.tensor(1);
  Shape shape = embedding_shape(weight, indices);
  int64_t padding_idx = c.int_(2);
  Tensor w = weight;
  if (padding_row_exists(weight, padding_idx))
    w = index_put(weight, {full({1}, padding_idx, DType::I64)}, unsqueeze(select(weight.detach(), 0, padding_idx), 0));
  return {reshape(index_select(w, 0, reshape(indices, {indices.numel()})), shape)};
}

// ---------------------------------------------------------------- cat / stack

// PyTorch's legacy rule: 1-D empty tensors (shape [0]) are skipped by cat whatever the other shapes.
bool cat_skips(const Tensor& t) { return t.dim() == 1 && t.sizes()[0] == 0; }

struct CatPlan {
  Shape sizes;
  int64_t dim = -1;  // -1 when every input is skipped (the result is then [0])
  DType dtype{};
};
CatPlan plan_cat(const TensorList& xs, int64_t dim) {
  KILN_CHECK(!xs.empty(), "cat: expected a non-empty list of tensors");
  for (size_t i = 0; i < xs.size(); ++i)
    KILN_CHECK(xs[i].dim() > 0, "cat: zero-dimensional tensor (at position {}) cannot be concatenated", i);
  CatPlan p;
  p.dtype = result_type(xs);
  auto ref = std::find_if(xs.begin(), xs.end(), [](const Tensor& t) { return !cat_skips(t); });
  if (ref == xs.end()) {
    p.sizes = {0};
    return p;
  }
  p.dim = wrap_dim(dim, ref->dim(), "cat");
  p.sizes = ref->sizes();
  p.sizes[size_t(p.dim)] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& t = xs[i];
    if (cat_skips(t)) continue;
    KILN_CHECK(t.dim() == ref->dim(), "cat: tensors must have the same number of dimensions: got {} and {} (tensor {} "
               "is {}, tensor {} is {})", ref->dim(), t.dim(), ref - xs.begin(), shape_str(ref->sizes()), i, shape_str(t.sizes()));
    for (int64_t k = 0; k < t.dim(); ++k)
      KILN_CHECK(k == p.dim || t.sizes()[size_t(k)] == ref->sizes()[size_t(k)], "cat: sizes of tensors must match "
                 "except in dimension {}: expected size {} but got size {} for tensor number {} in the list (shapes {} "
                 "and {})", p.dim, ref->sizes()[size_t(k)], t.sizes()[size_t(k)], i, shape_str(ref->sizes()), shape_str(t.sizes()));
    p.sizes[size_t(p.dim)] = checked_add(p.sizes[size_t(p.dim)], t.sizes()[size_t(p.dim)], "cat",
                                         "the concatenated size");
  }
  return p;
}
std::vector<TensorMeta> cat_infer(const OpCall& c) {
  CatPlan p = plan_cat(c.tensors(0), c.int_(1));
  return {contiguous_meta(p.sizes, p.dtype)};
}
std::vector<Tensor> cat_kernel(const OpCall& c) {
  const TensorList& xs = c.tensors(0);
  CatPlan p = plan_cat(xs, c.int_(1));
  Tensor out = Tensor::empty(p.sizes, p.dtype);
  int64_t at = 0;
  for (const Tensor& t : xs) {
    if (cat_skips(t)) continue;
    copy_into(make_view(out, t.sizes(), out.strides(), out.offset() + at * out.strides()[size_t(p.dim)]), t);
    at += t.sizes()[size_t(p.dim)];
  }
  return {out};
}
std::vector<Tensor> cat_vjp(const VjpCall& v) {
  const TensorList& xs = v.call.tensors(0);
  const Tensor& g = v.grads[0];
  CatPlan p = plan_cat(xs, v.call.int_(1));
  std::vector<Tensor> grads(xs.size());
  int64_t at = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (cat_skips(xs[i])) {
      if (v.needs(int(i))) grads[i] = zeros({0}, g.dtype());
      continue;
    }
    int64_t n = xs[i].sizes()[size_t(p.dim)];
    if (v.needs(int(i))) grads[i] = narrow(g, p.dim, at, n);
    at += n;
  }
  return grads;
}

int64_t stack_dim(const TensorList& xs, int64_t dim) {
  KILN_CHECK(!xs.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 1; i < xs.size(); ++i)
    KILN_CHECK(xs[i].sizes() == xs[0].sizes(), "stack: expects each tensor to be equal size, but got {} at entry 0 and "
               "{} at entry {}", shape_str(xs[0].sizes()), shape_str(xs[i].sizes()), i);
  return wrap_dim(dim, xs[0].dim() + 1, "stack");
}
std::vector<TensorMeta> stack_infer(const OpCall& c) {
  const TensorList& xs = c.tensors(0);
  int64_t d = stack_dim(xs, c.int_(1));
  Shape sizes = xs[0].sizes();
  sizes.insert(sizes.begin() + d, int64_t(xs.size()));
  return {contiguous_meta(sizes, result_type(xs))};
}
std::vector<Tensor> stack_decomp(const OpCall& c) {
  const TensorList& xs = c.tensors(0);
  int64_t d = stack_dim(xs, c.int_(1));
  TensorList parts;
  for (const Tensor& t : xs) parts.push_back(unsqueeze(t, d));
  return {cat(parts, d)};
}

// ---------------------------------------------------------------- repeat

// The result of repeat seen as [r0, s0, r1, s1, ...] (each repeat count next to the padded input size).
Shape repeat_interleaved(const Shape& sizes, const IntList& repeats) {
  size_t lead = repeats.size() - sizes.size();
  Shape s;
  for (size_t i = 0; i < repeats.size(); ++i) {
    s.push_back(repeats[i]);
    s.push_back(i < lead ? 1 : sizes[i - lead]);
  }
  return s;
}
std::vector<TensorMeta> repeat_infer(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  const IntList& repeats = c.ints(1);
  KILN_CHECK(int64_t(repeats.size()) >= x.dim(), "repeat: the number of repeat dims ({}) can not be smaller than the "
             "number of dimensions of the tensor {}", repeats.size(), x.str());
  for (int64_t r : repeats) KILN_CHECK(r >= 0, "repeat: repeats must be non-negative, got {}", shape_str(repeats));
  Shape inter = repeat_interleaved(x.sizes(), repeats), sizes;
  for (size_t i = 0; i < repeats.size(); ++i)
    sizes.push_back(checked_mul(inter[2 * i], inter[2 * i + 1], "repeat", kTooManyElements));
  return {contiguous_meta(sizes, x.dtype())};
}
std::vector<Tensor> repeat_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  const IntList& repeats = c.ints(1);
  TensorMeta m = repeat_infer(c)[0];
  Tensor out = Tensor::empty(m.sizes, m.dtype);
  Shape inter = repeat_interleaved(x.sizes(), repeats), src_strides;
  size_t lead = repeats.size() - size_t(x.dim());
  for (size_t i = 0; i < repeats.size(); ++i) {
    src_strides.push_back(0);
    src_strides.push_back(i < lead ? 0 : x.strides()[i - lead]);
  }
  copy_into(make_view(out, inter, contiguous_strides(inter), out.offset()), make_view(x, inter, src_strides, x.offset()));
  return {out};
}
std::vector<Tensor> repeat_vjp(const VjpCall& v) {
  const Tensor& x = v.call.tensor(0);
  const IntList& repeats = v.call.ints(1);
  if (repeats.empty()) return {v.grads[0]};
  Shape inter = repeat_interleaved(x.sizes(), repeats);
  IntList repeat_dims;
  for (size_t i = 0; i < repeats.size(); ++i) repeat_dims.push_back(int64_t(2 * i));
  return {reshape(sum(reshape(v.grads[0], inter), repeat_dims), x.sizes())};
}

// ---------------------------------------------------------------- flip / roll

std::vector<int64_t> flip_dims(const Tensor& x, const IntList& dims) {
  std::vector<int64_t> out;
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, x.dim(), "flip");
    KILN_CHECK(std::find(out.begin(), out.end(), w) == out.end(), "flip: dim {} appears multiple times in the list of "
               "dims {}", w, shape_str(dims));
    out.push_back(w);
  }
  return out;
}
std::vector<TensorMeta> flip_infer(const OpCall& c) {
  flip_dims(c.tensor(0), c.ints(1));
  return {contiguous_meta(c.tensor(0).sizes(), c.tensor(0).dtype())};
}
// A copy of the view that walks the flipped dims backwards (negative strides).
std::vector<Tensor> flip_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  std::vector<int64_t> dims = flip_dims(x, c.ints(1));
  Tensor out = Tensor::empty(x.sizes(), x.dtype());
  Shape strides = x.strides();
  int64_t offset = x.offset();
  if (x.dim() > 0 && x.numel() > 0) {
    for (int64_t d : dims) {
      offset += (x.sizes()[size_t(d)] - 1) * strides[size_t(d)];
      strides[size_t(d)] = -strides[size_t(d)];
    }
  }
  copy_into(out, make_view(x, x.sizes(), strides, offset));
  return {out};
}
std::vector<Tensor> flip_vjp(const VjpCall& v) { return {flip(v.grads[0], v.call.ints(1))}; }

// Checks roll's arguments; returns the wrapped dims (empty: roll the flattened tensor).
std::vector<int64_t> roll_dims(const Tensor& x, const IntList& shifts, const IntList& dims) {
  KILN_CHECK(!shifts.empty(), "roll: `shifts` required");
  if (dims.empty()) {
    KILN_CHECK(shifts.size() == 1, "roll: shifts and dimensions must align: got {} shifts and no dims (without dims, "
               "give exactly one shift)", shifts.size());
    return {};
  }
  KILN_CHECK(shifts.size() == dims.size(), "roll: shifts and dimensions must align: got {} shifts and {} dims",
             shifts.size(), dims.size());
  KILN_CHECK(x.dim() > 0, "roll: cannot roll a 0-dim tensor along a dimension (use dims=[])");
  std::vector<int64_t> out;
  for (int64_t d : dims) out.push_back(wrap_dim(d, x.dim(), "roll"));
  return out;
}
std::vector<TensorMeta> roll_infer(const OpCall& c) {
  roll_dims(c.tensor(0), c.ints(1), c.ints(2));
  return {contiguous_meta(c.tensor(0).sizes(), c.tensor(0).dtype())};
}
Tensor roll_along(const Tensor& x, int64_t shift, int64_t dim) {
  int64_t n = x.sizes()[size_t(dim)];
  if (n == 0) return clone(x);
  int64_t s = shift % n;
  if (s < 0) s += n;
  if (s == 0) return clone(x);
  return cat({narrow(x, dim, n - s, s), narrow(x, dim, 0, n - s)}, dim);
}
std::vector<Tensor> roll_decomp(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  const IntList& shifts = c.ints(1);
  std::vector<int64_t> dims = roll_dims(x, shifts, c.ints(2));
  if (dims.empty()) return {reshape(roll_along(reshape(x, {x.numel()}), shifts[0], 0), x.sizes())};
  Tensor r = x;
  for (size_t i = 0; i < dims.size(); ++i) r = roll_along(r, shifts[i], dims[i]);
  return {r};
}

// ---------------------------------------------------------------- tril / triu

// A copy of x with the elements above (tril) or below (triu) the diagonal-th diagonal of each matrix zeroed.
Tensor triangle(const Tensor& x, int64_t diagonal, bool lower, std::string_view op) {
  KILN_CHECK(x.dim() >= 2, "{}: input tensor must have at least 2 dimensions, got {}", op, x.str());
  Tensor out = contiguous_copy(x);
  const int64_t rows = x.sizes()[size_t(x.dim() - 2)], cols = x.sizes()[size_t(x.dim() - 1)];
  if (out.numel() == 0) return out;
  const int64_t k = std::clamp<int64_t>(diagonal, -rows - 1, cols + 1);
  const int64_t esize = dtype_size(x.dtype());
  char* base = static_cast<char*>(out.data_ptr());
  parallel_for(out.numel() / cols, std::max<int64_t>(1, kParallelGrain / cols), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t i = r % rows;
      int64_t from = lower ? std::clamp<int64_t>(i + k + 1, 0, cols) : 0;
      int64_t to = lower ? cols : std::clamp<int64_t>(i + k, 0, cols);
      if (to > from) std::memset(base + (r * cols + from) * esize, 0, size_t((to - from) * esize));  // 0 is all-zero bits
    }
  });
  return out;
}
std::vector<TensorMeta> triangle_infer(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  KILN_CHECK(x.dim() >= 2, "{}: input tensor must have at least 2 dimensions, got {}", c.name(), x.str());
  return {contiguous_meta(x.sizes(), x.dtype())};
}
std::vector<Tensor> tril_kernel(const OpCall& c) { return {triangle(c.tensor(0), c.int_(1), true, "tril")}; }
std::vector<Tensor> triu_kernel(const OpCall& c) { return {triangle(c.tensor(0), c.int_(1), false, "triu")}; }
std::vector<Tensor> tril_vjp(const VjpCall& v) { return {tril(v.grads[0], v.call.int_(1))}; }
std::vector<Tensor> triu_vjp(const VjpCall& v) { return {triu(v.grads[0], v.call.int_(1))}; }

// ---------------------------------------------------------------- pad

enum class PadMode { Constant, Reflect, Replicate, Circular };
PadMode pad_mode(const std::string& mode) {
  if (mode == "constant") return PadMode::Constant;
  if (mode == "reflect") return PadMode::Reflect;
  if (mode == "replicate") return PadMode::Replicate;
  if (mode == "circular") return PadMode::Circular;
  fail("pad: unrecognised padding mode '{}' (valid modes: constant, reflect, replicate, circular)", mode);
}

// The padded shape; pad lists (before, after) pairs from the last dim backwards, negative values crop.
// Non-constant modes follow ATen's _pad_enum: they pad the last 1-3 dims of an input with one or two more
// dims (batch, channel), and take no fill value.
Shape pad_shape(const Tensor& x, const IntList& pads, const std::string& mode_name, std::optional<double> value) {
  PadMode mode = pad_mode(mode_name);
  KILN_CHECK(pads.size() % 2 == 0, "pad: padding length must be divisible by 2, got {} values {}", pads.size(), shape_str(pads));
  KILN_CHECK(int64_t(pads.size() / 2) <= x.dim(), "pad: padding length should be less than or equal to two times the "
             "input dimension but got padding length {} and input of dimension {}", pads.size(), x.dim());
  const int64_t k = int64_t(pads.size() / 2);
  if (mode != PadMode::Constant) {
    KILN_CHECK(!value || *value == 0, "pad: padding mode '{}' doesn't take in value argument (got {})", mode_name, *value);
    KILN_CHECK(k >= 1 && k <= 3 && (x.dim() == k + 1 || x.dim() == k + 2), "pad: mode '{}' pads the last 1, 2 or 3 "
               "dims of a 2-D to 5-D input (a batch and/or channel dim first): got padding length {} for {}",
               mode_name, pads.size(), x.str());
  }
  Shape sizes = x.sizes();
  for (int64_t i = 0; i < k; ++i) {
    size_t d = sizes.size() - 1 - size_t(i);
    int64_t n = sizes[d], before = pads[size_t(2 * i)], after = pads[size_t(2 * i + 1)];
    int64_t out = checked_add(checked_add(n, before, "pad", "the padded size"), after, "pad", "the padded size");
    if (mode == PadMode::Constant) {
      KILN_CHECK(out >= 0, "pad: the input size {}, plus negative padding {} and {} resulted in a negative output "
                 "size, which is invalid (dimension {} of {})", n, before, after, d, x.str());
      KILN_CHECK(std::max<int64_t>(-before, 0) + std::max<int64_t>(-after, 0) <= n, "pad: negative padding {} and {} "
                 "crops more than the {} elements of dimension {} of {}", before, after, n, d, x.str());
    } else {
      KILN_CHECK(n > 0, "pad: mode '{}' needs non-empty padded dims, but dimension {} of {} has size 0", mode_name, d, x.str());
      KILN_CHECK(mode != PadMode::Reflect || (before < n && after < n), "pad: padding size should be less than the "
                 "corresponding input dimension, but got: padding ({}, {}) at dimension {} of input {}", before, after, d, x.str());
      KILN_CHECK(mode != PadMode::Circular || (before <= n && after <= n), "pad: padding ({}, {}) at dimension {} of "
                 "input {} causes wrapping around more than once", before, after, d, x.str());
      KILN_CHECK(out >= 1, "pad: input (size {} at dimension {}) is too small for padding ({}, {}): calculated output "
                 "size {}", n, d, before, after, out);
    }
    sizes[d] = out;
  }
  return sizes;
}
std::vector<TensorMeta> pad_infer(const OpCall& c) {
  return {contiguous_meta(pad_shape(c.tensor(0), c.ints(1), c.str(2), c.opt_float(3)), c.tensor(0).dtype())};
}

// Reflect/replicate/circular padding as advanced indexing: per padded dim, the input position each output
// position reads (ATen's PaddingKernel index rules), shaped to broadcast into an outer product.
OptTensorList pad_source_indices(const Shape& sizes, const IntList& pads, PadMode mode) {
  const int64_t k = int64_t(pads.size() / 2), ndim = int64_t(sizes.size());
  OptTensorList indices(static_cast<size_t>(ndim));
  for (int64_t i = 0; i < k; ++i) {
    int64_t d = ndim - 1 - i, n = sizes[size_t(d)], before = pads[size_t(2 * i)];
    int64_t out = n + before + pads[size_t(2 * i + 1)];
    int64_t offset = std::max<int64_t>(0, -before) - std::max<int64_t>(0, before);
    std::vector<int64_t> src(static_cast<size_t>(out));
    for (int64_t j = 0; j < out; ++j) {
      if (mode == PadMode::Reflect)
        src[size_t(j)] = (j < before ? 2 * before - j : j < n + before ? j : 2 * (n + before - 1) - j) + offset;
      else if (mode == PadMode::Replicate)
        src[size_t(j)] = std::clamp<int64_t>(j, before, n + before - 1) + offset;
      else
        src[size_t(j)] = ((j - before) % n + n) % n;
    }
    Shape shape{out};
    shape.insert(shape.end(), size_t(i), 1);
    indices[size_t(d)] = Tensor::from_vector<int64_t>(src, shape);
  }
  return indices;
}

std::vector<Tensor> pad_kernel(const OpCall& c) {
  const Tensor& x = c.tensor(0);
  const IntList& pads = c.ints(1);
  Shape sizes = pad_shape(x, pads, c.str(2), c.opt_float(3));
  PadMode mode = pad_mode(c.str(2));
  if (mode != PadMode::Constant) return {index(x, pad_source_indices(x.sizes(), pads, mode))};
  Tensor out = Tensor::empty(sizes, x.dtype());
  if (std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p > 0; }))
    copy_into(out, Tensor::scalar(Scalar(c.opt_float(3).value_or(0.0)), DType::F64));
  // the part of x that survives the cropping, and where it lands in out
  Shape kept = x.sizes();
  int64_t src_offset = x.offset(), dst_offset = out.offset();
  for (size_t i = 0; i < pads.size() / 2; ++i) {
    size_t d = kept.size() - 1 - i;
    int64_t before = pads[2 * i], after = pads[2 * i + 1];
    kept[d] -= std::max<int64_t>(-before, 0) + std::max<int64_t>(-after, 0);
    src_offset += std::max<int64_t>(-before, 0) * x.strides()[d];
    dst_offset += std::max<int64_t>(before, 0) * out.strides()[d];
  }
  if (shape_numel(kept) > 0)
    copy_into(make_view(out, kept, out.strides(), dst_offset), make_view(x, kept, x.strides(), src_offset));
  return {out};
}
// Constant: the gradient cropped back (pad with the negated widths). Other modes: every output position adds
// its gradient to the input position it read.
std::vector<Tensor> pad_vjp(const VjpCall& v) {
  const Tensor& x = v.call.tensor(0);
  const IntList& pads = v.call.ints(1);
  const Tensor& g = v.grads[0];
  PadMode mode = pad_mode(v.call.str(2));
  if (mode != PadMode::Constant)
    return {index_put(zeros(x.sizes(), g.dtype()), pad_source_indices(x.sizes(), pads, mode), g, true)};
  IntList negated;
  for (int64_t p : pads) negated.push_back(-p);
  return {pad(g, negated)};
}

}  // namespace

void register_index_ops() {
  def(OpId::cat).infer(cat_infer).kernel(cat_kernel).vjp(cat_vjp);
  def(OpId::stack).infer(stack_infer).decomp(stack_decomp);
  def(OpId::repeat).infer(repeat_infer).kernel(repeat_kernel).vjp(repeat_vjp);
  def(OpId::flip).infer(flip_infer).kernel(flip_kernel).vjp(flip_vjp);
  def(OpId::roll).infer(roll_infer).decomp(roll_decomp);
  def(OpId::tril).infer(triangle_infer).kernel(tril_kernel).vjp(tril_vjp);
  def(OpId::triu).infer(triangle_infer).kernel(triu_kernel).vjp(triu_vjp);
  def(OpId::pad).infer(pad_infer).kernel(pad_kernel).vjp(pad_vjp);
  def(OpId::index_select).infer(index_select_infer).kernel(index_select_kernel).vjp(index_select_vjp);
  def(OpId::gather).infer(gather_infer).kernel(gather_kernel).vjp(gather_vjp);
  def(OpId::scatter).infer(scatter_infer).kernel(scatter_kernel).vjp(scatter_vjp);
  def(OpId::scatter_add).infer(scatter_infer).kernel(scatter_add_kernel).vjp(scatter_add_vjp);
  def(OpId::index).infer(index_infer).kernel(index_kernel).vjp(index_vjp);
  def(OpId::index_put).infer(index_put_infer).kernel(index_put_kernel).vjp(index_put_vjp);
  def(OpId::embedding).infer(embedding_infer).kernel(embedding_kernel).vjp(embedding_vjp).decomp(embedding_decomp);
}

}  // namespace kiln
