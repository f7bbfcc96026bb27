// The reduction, view, creation and data rules of the lowering table (lowerings.def): for one call, which dims
// a reduction reduces and how; a view's index map; a creation or data op's body over the result's index.
// lowering.cpp builds the loop-IR node or the pending value from what a rule returns.
#include <algorithm>

#include "eager/tensor.h"
#include "inductor/lowering_exprs.h"
#include "inductor/lowering_table.h"
#include "ops/api.h"
#include "ops/common.h"

namespace kiln::inductor {

std::vector<Index> broadcast_index(const std::vector<Index>& idx, const Shape& in_sizes) {
  std::vector<Index> in(in_sizes.size());
  size_t lead = idx.size() - in_sizes.size();
  for (size_t k = 0; k < in_sizes.size(); ++k) in[k] = in_sizes[k] == 1 ? ix_const(0) : idx[lead + k];
  return in;
}

// ---------------------------------------------------------------- reductions

namespace {

ReductionBody reduction(std::vector<int64_t> dims, ReduceOp op, DType acc_dt) {
  return ReductionBody{Decision::yes(), std::move(dims), op, acc_dt};
}
// The dims of an `int? dim` argument (None: all).
std::vector<int64_t> optional_dim(const OpCall& mc, int64_t ndim, std::string_view name) {
  std::optional<int64_t> d = mc.opt_int(1);
  return d ? reduction_dims(IntList{*d}, ndim, name) : reduction_dims(std::nullopt, ndim, name);
}

}  // namespace

ReductionBody reduce_sum_mean(const ReductionCall& c) {
  // A sum in bool is eager's saturating bool add, a logical or: accumulating in an i1 would wrap (1 + 1 = 0; a
  // kiln fuzz finding, tests/repros/sum_to_bool_is_a_logical_or.repro).
  const bool in_bool = c.out_dt == DType::Bool;
  ReductionBody r = reduction(reduction_dims(c.mc.opt_ints(1), c.mc.tensor(0).dim(), op_info(c.id).name),
                              in_bool ? ReduceOp::Any : ReduceOp::Sum, in_bool ? DType::Bool : compute_dtype_of(c.out_dt));
  r.divide_by_count = c.id == OpId::mean;
  return r;
}
ReductionBody reduce_prod(const ReductionCall& c) {
  return reduction(optional_dim(c.mc, c.mc.tensor(0).dim(), "prod"), ReduceOp::Prod, compute_dtype_of(c.out_dt));
}
ReductionBody reduce_amax_amin(const ReductionCall& c) {
  return reduction(reduction_dims(c.mc.ints(1), c.mc.tensor(0).dim(), op_info(c.id).name),
                   c.id == OpId::amax ? ReduceOp::Max : ReduceOp::Min, compute_dtype_of(c.out_dt));
}
ReductionBody reduce_argmax_argmin(const ReductionCall& c) {
  const Tensor& x = c.mc.tensor(0);
  ReductionBody r = reduction(optional_dim(c.mc, x.dim(), op_info(c.id).name),
                              c.id == OpId::argmax ? ReduceOp::ArgMax : ReduceOp::ArgMin, compute_dtype_of(x.dtype()));
  if (x.numel() == 0) r.decision = Decision::no("arg-reduction of an empty tensor (the eager kernel reports the error)");
  return r;
}
ReductionBody reduce_any_all(const ReductionCall& c) {  // an explicit empty dim list reduces nothing (as eager)
  return reduction(reduction_dims(c.mc.opt_ints(1), c.mc.tensor(0).dim(), op_info(c.id).name, !c.mc.opt_ints(1).has_value()),
                   c.id == OpId::any ? ReduceOp::Any : ReduceOp::All, DType::Bool);
}

// ---------------------------------------------------------------- views

namespace {

ViewBody view_map(IndexMap map) { return ViewBody{Decision::yes(), std::move(map)}; }
int64_t ndim_of(const ViewCall& c) { return int64_t(c.in_sizes.size()); }

}  // namespace

ViewBody view_view(const ViewCall& c) {
  return view_map([in = c.in_sizes, out = c.out_sizes](const std::vector<Index>& idx) {
    return ix_unravel(ix_linear(idx, out), in);
  });
}
ViewBody view_permute(const ViewCall& c) {
  std::vector<int64_t> dims;
  for (int64_t d : c.mc.ints(1)) dims.push_back(wrap_dim(d, ndim_of(c), "permute"));
  return view_map([dims](const std::vector<Index>& idx) {
    std::vector<Index> in(dims.size());
    for (size_t k = 0; k < dims.size(); ++k) in[size_t(dims[k])] = idx[k];
    return in;
  });
}
ViewBody view_transpose(const ViewCall& c) {
  const int64_t ndim = ndim_of(c);
  int64_t d0 = ndim == 0 ? 0 : wrap_dim(c.mc.int_(1), ndim, "transpose");
  int64_t d1 = ndim == 0 ? 0 : wrap_dim(c.mc.int_(2), ndim, "transpose");
  return view_map([d0, d1](std::vector<Index> idx) {
    if (!idx.empty()) std::swap(idx[size_t(d0)], idx[size_t(d1)]);
    return idx;
  });
}
ViewBody view_expand(const ViewCall& c) {
  return view_map([in = c.in_sizes](const std::vector<Index>& idx) { return broadcast_index(idx, in); });
}
ViewBody view_slice(const ViewCall& c) {
  int64_t dim = wrap_dim(c.mc.int_(1), ndim_of(c), "slice");
  int64_t size = c.in_sizes[size_t(dim)];
  int64_t start = c.mc.opt_int(2).value_or(0);
  if (start < 0) start += size;
  start = std::clamp<int64_t>(start, 0, size);
  int64_t step = c.mc.int_(4);
  return view_map([dim, start, step](std::vector<Index> idx) {
    idx[size_t(dim)] = ix_add(ix_scale(idx[size_t(dim)], step), ix_const(start));
    return idx;
  });
}
ViewBody view_select(const ViewCall& c) {
  int64_t dim = wrap_dim(c.mc.int_(1), ndim_of(c), "select");
  int64_t index = c.mc.int_(2);
  if (index < 0) index += c.in_sizes[size_t(dim)];
  return view_map([dim, index](std::vector<Index> idx) {
    idx.insert(idx.begin() + dim, ix_const(index));
    return idx;
  });
}
// Both only add or drop size-1 dims: map the non-1 dims in order, size-1 input dims read index 0.
// detach: the same elements (gradients stopping is the joint graph's business, not the loop IR's).
ViewBody view_identity(const ViewCall&) {
  return view_map([](const std::vector<Index>& idx) { return idx; });
}
ViewBody view_squeeze_unsqueeze(const ViewCall& c) {
  return view_map([in = c.in_sizes, out = c.out_sizes](const std::vector<Index>& idx) {
    std::vector<Index> kept;
    for (size_t k = 0; k < out.size(); ++k)
      if (out[k] != 1) kept.push_back(idx[k]);
    std::vector<Index> r;
    size_t j = 0;
    for (int64_t s : in) r.push_back(s == 1 ? ix_const(0) : kept[j++]);
    return r;
  });
}
ViewBody view_diagonal(const ViewCall& c) {
  const int64_t ndim = ndim_of(c);
  int64_t offset = c.mc.int_(1);
  int64_t d1 = wrap_dim(c.mc.int_(2), ndim, "diagonal"), d2 = wrap_dim(c.mc.int_(3), ndim, "diagonal");
  return view_map([offset, d1, d2, ndim](const std::vector<Index>& idx) {
    std::vector<Index> src_idx(static_cast<size_t>(ndim));
    size_t k = 0;
    for (int64_t d = 0; d < ndim; ++d)
      if (d != d1 && d != d2) src_idx[size_t(d)] = idx[k++];
    const Index& i = idx.back();
    src_idx[size_t(d1)] = ix_add(i, ix_const(offset < 0 ? -offset : 0));
    src_idx[size_t(d2)] = ix_add(i, ix_const(offset > 0 ? offset : 0));
    return src_idx;
  });
}
// Addressed in eager's storage of the source (storage_model.h; StorageModel::check has kept it inside):
// lowering.cpp `lower_view_in_storage`.
ViewBody view_as_strided(const ViewCall&) { return ViewBody{Decision::yes(), nullptr, true}; }

// ---------------------------------------------------------------- creation

namespace {

CreationBody constant_body(SExpr k) {
  return CreationBody{Decision::yes(), [k](const std::vector<Index>&) { return k; }};
}

}  // namespace

CreationBody create_full(const CreationCall& c) {  // the fill value as the dtype sees it (converted as eager)
  const Scalar s = c.mc.scalar(1);
  const DType cdt = compute_dtype_of(c.dt);
  Tensor t = to(Tensor::scalar(s, s.is_float() ? DType::F64 : s.is_bool() ? DType::Bool : DType::I64), c.dt);
  Scalar v = t.item();
  return constant_body(is_floating(cdt) ? s_const(v.to_double(), cdt) : s_iconst(v.to_int(), cdt));
}
CreationBody create_zeros_ones(const CreationCall& c) {
  return constant_body(s_const(c.id == OpId::ones || c.id == OpId::ones_like ? 1 : 0, compute_dtype_of(c.dt)));
}
CreationBody create_eye(const CreationCall& c) {
  return CreationBody{Decision::yes(), [cdt = compute_dtype_of(c.dt)](const std::vector<Index>& idx) {
    return s_cast(s_binary(SOp::Eq, s_index_value(idx[0]), s_index_value(idx[1])), cdt);
  }};
}
CreationBody create_arange(const CreationCall& c) {
  const DType cdt = compute_dtype_of(c.dt);
  if (is_integral(c.dt, true)) {
    int64_t start = c.mc.scalar(0).to_int(), step = c.mc.scalar(2).to_int();
    return CreationBody{Decision::yes(), [start, step, cdt](const std::vector<Index>& idx) {
      return s_cast(s_index_value(ix_add(ix_scale(idx[0], step), ix_const(start))), cdt);
    }};
  }
  double start = c.mc.scalar(0).to_double(), step = c.mc.scalar(2).to_double();
  return CreationBody{Decision::yes(), [start, step, cdt](const std::vector<Index>& idx) {
    SExpr i = s_cast(s_index_value(idx[0]), DType::F64);
    return s_cast(pw::add(s_const(start, DType::F64), pw::mul(i, s_const(step, DType::F64))), cdt);
  }};
}

// ---------------------------------------------------------------- data movement

DataBody data_copy(const DataCall& c) { return DataBody{Decision::yes(), c.in.load, c.in.cost}; }  // contiguous, clone
DataBody data_flip(const DataCall& c) {
  const Shape sizes = c.out.sizes;
  std::vector<bool> flipped(std::max<size_t>(sizes.size(), 1), false);  // a 0-d tensor accepts dim 0
  for (int64_t d : c.mc.ints(1)) flipped[size_t(wrap_dim(d, int64_t(sizes.size()), "flip"))] = true;
  return DataBody{Decision::yes(), [in = c.in, flipped, sizes](std::vector<Index> idx) {
    for (size_t d = 0; d < idx.size(); ++d)
      if (flipped[d]) idx[d] = ix_add(ix_const(sizes[d] - 1), ix_scale(idx[d], -1));
    return in.load(idx);
  }};
}
DataBody data_tril_triu(const DataCall& c) {
  int64_t diag = c.mc.int_(1);
  bool lower = c.id == OpId::tril;
  DType cdt = compute_dtype_of(c.out.dtype);
  return DataBody{Decision::yes(), [in = c.in, diag, lower, cdt](const std::vector<Index>& idx) {
    size_t r = idx.size() - 2, col = idx.size() - 1;
    SExpr d = s_index_value(ix_add(idx[col], ix_scale(idx[r], -1)));  // col - row
    SExpr keep = s_binary(lower ? SOp::Le : SOp::Ge, d, s_iconst(diag, DType::I64));
    return s_where(keep, in.load(idx), s_const(0, cdt));
  }};
}
DataBody data_repeat(const DataCall& c) {
  return DataBody{Decision::yes(), [in = c.in, in_sizes = c.in.sizes](const std::vector<Index>& idx) {
    std::vector<Index> src(in_sizes.size());
    size_t lead = idx.size() - in_sizes.size();
    for (size_t d = 0; d < in_sizes.size(); ++d) src[d] = in_sizes[d] == 0 ? ix_const(0) : ix_mod(idx[lead + d], in_sizes[d]);
    return in.load(src);
  }};
}

}  // namespace kiln::inductor
