// Core ATen ops that real models export and kiln has no op of its own for, written with kiln's ops at import
// (`--decompose core`; docs/import.md): scatters into slices, masked scatters and scatter reductions, embedding
// bags, 3-D pooling, batch statistics (instance norm), col2im (nn.Fold), distances, grid sampling, randperm.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "import/aten_ops.h"

namespace kiln::importer {

using graph::Arg;
using graph::ValueId;

namespace {

using Rows = std::map<std::string, AtenRow, std::less<>>;
using Args = std::vector<std::pair<std::string, Arg>>;

graph::TensorArg as_arg(ValueId id) { return graph::TensorArg{id}; }
ValueId id_of(const Arg& a) { return std::get<graph::TensorArg>(a).id; }
TensorMeta meta_of(AtenNode& n, const Arg& a) { return n.graph().value(id_of(a)).meta; }  // a copy: emit grows the graph
Scalar num(int64_t v) { return Scalar(v); }

void require(AtenNode& n, bool ok, const std::string& why) {
  if (!ok) n.unsupported(why);
}

int64_t wrap_dim(AtenNode& n, int64_t dim, size_t rank) {
  const int64_t r = std::max<int64_t>(int64_t(rank), 1);
  require(n, dim >= -r && dim < r, fmt::format("dim {} is out of range for a tensor of {} dims", dim, rank));
  return dim < 0 ? dim + r : dim;
}

double float_or(AtenNode& n, std::string_view name, double fallback) {
  if (!n.has(name)) return fallback;
  ArgSpec spec;
  spec.type = ArgType::Float;
  return std::get<Scalar>(n.convert(name, n.arg(name), spec)).to_double();
}

// An int[k] argument: ATen lets one value stand for all k; an empty list takes `fallback`.
std::vector<int64_t> ints_k(AtenNode& n, std::string_view name, size_t k, std::vector<int64_t> fallback) {
  std::vector<int64_t> v = n.ints_or(name, {});
  if (v.empty()) v = fallback;
  if (v.size() == 1) v.assign(k, v[0]);
  require(n, v.size() == k, fmt::format("argument '{}' has {} values, expected {}", name, v.size(), k));
  return v;
}

ValueId op(AtenNode& n, std::string_view name, const Args& args) { return n.emit1(name, args); }
ValueId binary(AtenNode& n, std::string_view name, ValueId a, Arg b) {
  return op(n, name, {{"self", as_arg(a)}, {"other", std::move(b)}});
}
ValueId unary(AtenNode& n, std::string_view name, ValueId a) { return op(n, name, {{"self", as_arg(a)}}); }
ValueId reshape(AtenNode& n, ValueId a, IntList shape) { return op(n, "reshape", {{"self", as_arg(a)}, {"shape", shape}}); }
ValueId cast(AtenNode& n, ValueId a, DType dt) { return op(n, "to", {{"self", as_arg(a)}, {"dtype", dt}}); }

// self with the positions start, start + step, ... (src.sizes[dim] of them) along `dim` replaced by src: a
// scatter whose index is that arange, broadcast to src's shape.
ValueId scatter_strided(AtenNode& n, ValueId self, ValueId src, int64_t dim, int64_t start, int64_t step) {
  const Shape src_sizes = n.graph().value(src).meta.sizes;
  const int64_t count = src_sizes.empty() ? 1 : src_sizes[size_t(dim)];
  if (count == 0) return self;
  ValueId index = op(n, "arange", {{"start", num(start)}, {"end", num(start + count * step)}, {"step", num(step)},
                                   {"dtype", DType::I64}});
  IntList along(std::max<size_t>(src_sizes.size(), 1), 1);
  along[size_t(dim)] = count;
  index = op(n, "expand", {{"self", as_arg(reshape(n, index, along))}, {"size", IntList(src_sizes)}});
  return op(n, "scatter", {{"self", as_arg(self)}, {"dim", num(dim)}, {"index", as_arg(index)}, {"src", as_arg(src)}});
}

void add_scatters(Rows& r) {
  r["slice_scatter.default"] = {[](AtenNode& n) {
    const TensorMeta self = meta_of(n, n.tensor("self"));
    const int64_t dim = wrap_dim(n, n.int_or("dim", 0), self.sizes.size());
    const int64_t size = self.sizes.empty() ? 1 : self.sizes[size_t(dim)], step = n.int_or("step", 1);
    require(n, step > 0, fmt::format("step must be positive, got {}", step));
    auto clamped = [size](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
    const int64_t start = clamped(n.int_or("start", 0)), end = std::max(start, clamped(n.int_or("end", size)));
    const Shape src = meta_of(n, n.tensor("src")).sizes;
    const int64_t length = (end - start + step - 1) / step, given = src.empty() ? 1 : src[size_t(dim)];
    require(n, given == length, fmt::format("src has {} elements along dim {} where the slice [{}:{}:{}] has {}", given,
                                            dim, start, end, step, length));
    return std::vector<ValueId>{scatter_strided(n, id_of(n.tensor("self")), id_of(n.tensor("src")), dim, start, step)};
  }, true};
  r["select_scatter.default"] = {[](AtenNode& n) {
    const TensorMeta self = meta_of(n, n.tensor("self"));
    const int64_t dim = wrap_dim(n, n.int_or("dim", 0), self.sizes.size());
    const int64_t size = self.sizes.empty() ? 1 : self.sizes[size_t(dim)];
    int64_t index = n.int_or("index", 0);
    require(n, index >= -size && index < size, fmt::format("index {} is out of range for dim {} of size {}", index, dim, size));
    if (index < 0) index += size;
    ValueId src = op(n, "unsqueeze", {{"self", n.tensor("src")}, {"dim", num(dim)}});
    return std::vector<ValueId>{scatter_strided(n, id_of(n.tensor("self")), src, dim, index, 1)};
  }, true};
  r["masked_scatter.default"] = {[](AtenNode& n) {
    // Where the mask holds, the source's elements in order: source[cumsum(mask) - 1].
    const TensorMeta source = meta_of(n, n.tensor("source"));
    ValueId x = op(n, "where", {{"condition", n.tensor("mask")}, {"self", n.tensor("self")}, {"other", n.tensor("self")}});
    const Shape shape = n.graph().value(x).meta.sizes;
    int64_t numel = 1, source_numel = 1;
    for (int64_t s : shape) numel *= s;
    for (int64_t s : source.sizes) source_numel *= s;
    if (numel == 0 || source_numel == 0) return std::vector<ValueId>{x};
    ValueId flat_mask = reshape(n, op(n, "expand", {{"self", n.tensor("mask")}, {"size", IntList(shape)}}), {numel});
    ValueId position = op(n, "cumsum", {{"self", as_arg(cast(n, flat_mask, DType::I64))}, {"dim", num(0)}});
    position = op(n, "clamp", {{"self", as_arg(binary(n, "sub", position, num(1)))}, {"min", num(0)},
                               {"max", num(source_numel - 1)}});
    ValueId values = op(n, "index_select", {{"self", as_arg(reshape(n, id_of(n.tensor("source")), {source_numel}))},
                                            {"dim", num(0)}, {"index", as_arg(position)}});
    ValueId out = op(n, "where", {{"condition", as_arg(flat_mask)}, {"self", as_arg(values)},
                                  {"other", as_arg(reshape(n, x, {numel}))}});
    return std::vector<ValueId>{reshape(n, out, IntList(shape))};
  }, true};
  r["scatter_reduce.two"] = {[](AtenNode& n) {
    // sum: scatter_add (onto self with the scattered positions zeroed first when include_self is false);
    // mean: that sum over the count of the values added (self counting once when included), at least 1.
    const std::string reduce = n.arg("reduce").at("as_string").get<std::string>();
    require(n, reduce == "sum" || reduce == "mean",
            fmt::format("reduce='{}' is not supported: kiln has scatters that add, not ones that multiply or take "
                        "the max or min (sum and mean are supported)", reduce));
    const bool include_self = n.bool_or("include_self", true);
    const TensorMeta self = meta_of(n, n.tensor("self")), index = meta_of(n, n.tensor("index"));
    const int64_t dim = n.int_or("dim", 0);
    auto scatter_add = [&](ValueId onto, Arg src) {
      return op(n, "scatter_add", {{"self", as_arg(onto)}, {"dim", num(dim)}, {"index", n.tensor("index")}, {"src", src}});
    };
    ValueId base = id_of(n.tensor("self"));
    if (!include_self)
      base = op(n, "scatter", {{"self", as_arg(base)}, {"dim", num(dim)}, {"index", n.tensor("index")},
                               {"src", as_arg(op(n, "zeros", {{"size", IntList(index.sizes)}, {"dtype", self.dtype}}))}});
    ValueId sum = scatter_add(base, n.tensor("src"));
    if (reduce == "sum") return std::vector<ValueId>{sum};
    ValueId count = op(n, include_self ? "ones_like" : "zeros_like", {{"self", n.tensor("self")}});
    count = scatter_add(count, as_arg(op(n, "ones", {{"size", IntList(index.sizes)}, {"dtype", self.dtype}})));
    count = op(n, "clamp", {{"self", as_arg(count)}, {"min", num(1)}});
    Args div = {{"self", as_arg(sum)}, {"other", as_arg(count)}};
    if (!is_floating(self.dtype)) div.emplace_back("rounding_mode", std::string("floor"));
    return std::vector<ValueId>{op(n, "div", div)};
  }, true};
}

// (output, offset2bag, bag_size, max_indices); only the output is computed. Each index's bag is the number of
// offsets at or before it, minus one; the bags are scatter_add of the looked-up (and weighted) rows.
std::vector<ValueId> embedding_bag(AtenNode& n) {
  const int64_t mode = n.int_or("mode", 0), padding_idx = n.int_or("padding_idx", -1);
  require(n, mode == 0 || mode == 1, "mode='max' is not supported (sum and mean are)");
  const TensorMeta weight = meta_of(n, n.tensor("weight")), indices = meta_of(n, n.tensor("indices"));
  const TensorMeta offsets = meta_of(n, n.tensor("offsets"));
  require(n, indices.sizes.size() == 1 && offsets.sizes.size() == 1 && weight.sizes.size() == 2,
          "expects 1-D indices and offsets and a 2-D weight");
  const int64_t count = indices.sizes[0], width = weight.sizes[1];
  const int64_t bags = offsets.sizes[0] - (n.bool_or("include_last_offset", false) ? 1 : 0);
  require(n, bags >= 0, "include_last_offset needs at least one offset");
  ValueId out = op(n, "zeros", {{"size", IntList{bags, width}}, {"dtype", weight.dtype}});
  if (count == 0 || bags == 0) return {out, graph::kNoValue, graph::kNoValue, graph::kNoValue};
  ValueId starts = cast(n, op(n, "narrow", {{"self", n.tensor("offsets")}, {"dim", num(0)}, {"start", num(0)},
                                           {"length", num(bags)}}), DType::I64);
  ValueId marks = op(n, "scatter_add", {{"self", as_arg(op(n, "zeros", {{"size", IntList{count + 1}}, {"dtype", DType::I64}}))},
                                        {"dim", num(0)}, {"index", as_arg(starts)},
                                        {"src", as_arg(op(n, "ones", {{"size", IntList{bags}}, {"dtype", DType::I64}}))}});
  marks = op(n, "narrow", {{"self", as_arg(marks)}, {"dim", num(0)}, {"start", num(0)}, {"length", num(count)}});
  ValueId bag = op(n, "clamp", {{"self", as_arg(binary(n, "sub", op(n, "cumsum", {{"self", as_arg(marks)}, {"dim", num(0)}}),
                                                       num(1)))}, {"min", num(0)}, {"max", num(bags - 1)}});
  ValueId ids = cast(n, id_of(n.tensor("indices")), DType::I64);
  ValueId rows = op(n, "index_select", {{"self", n.tensor("weight")}, {"dim", num(0)}, {"index", as_arg(ids)}});
  ValueId kept = op(n, "ones", {{"size", IntList{count}}, {"dtype", weight.dtype}});
  if (padding_idx >= 0) kept = cast(n, binary(n, "ne", ids, num(padding_idx)), weight.dtype);
  ValueId scale = kept;
  if (n.has("per_sample_weights")) {
    require(n, mode == 0, "per_sample_weights is only valid for mode='sum'");
    scale = binary(n, "mul", kept, n.tensor("per_sample_weights"));
  }
  rows = binary(n, "mul", rows, as_arg(op(n, "unsqueeze", {{"self", as_arg(scale)}, {"dim", num(1)}})));
  ValueId where = op(n, "expand", {{"self", as_arg(op(n, "unsqueeze", {{"self", as_arg(bag)}, {"dim", num(1)}}))},
                                   {"size", IntList{count, width}}});
  out = op(n, "scatter_add", {{"self", as_arg(out)}, {"dim", num(0)}, {"index", as_arg(where)}, {"src", as_arg(rows)}});
  if (mode == 1) {
    ValueId size = op(n, "scatter_add", {{"self", as_arg(op(n, "zeros", {{"size", IntList{bags}}, {"dtype", weight.dtype}}))},
                                         {"dim", num(0)}, {"index", as_arg(bag)}, {"src", as_arg(kept)}});
    size = op(n, "clamp", {{"self", as_arg(size)}, {"min", num(1)}});
    out = binary(n, "div", out, as_arg(op(n, "unsqueeze", {{"self", as_arg(size)}, {"dim", num(1)}})));
  }
  return {out, graph::kNoValue, graph::kNoValue, graph::kNoValue};
}

// The 3-D pools as the 2-D pool over (H, W) of [N, C*D, H, W], then the window along D taken by strided slices
// of the depth-padded result, combined by `combine` (add or maximum).
struct DepthWindow {
  int64_t kernel, stride, padding, dilation;
};

int64_t depth_out(AtenNode& n, int64_t depth, const DepthWindow& w, bool ceil_mode) {
  const int64_t span = depth + 2 * w.padding - w.dilation * (w.kernel - 1) - 1;
  require(n, span >= 0 && w.stride > 0, fmt::format("the depth window does not fit the input depth {}", depth));
  require(n, !ceil_mode || span % w.stride == 0,
          "ceil_mode=True is not supported where it adds an output depth (kiln's 3-D pools take the 2-D pool "
          "along H and W and strided slices along D)");
  return span / w.stride + 1;
}

ValueId depth_window(AtenNode& n, ValueId x, const DepthWindow& w, int64_t out_depth, double pad_value,
                     std::string_view combine) {
  const size_t rank = n.graph().value(x).meta.sizes.size();
  if (w.padding > 0) {
    IntList pads(6, 0);  // (before, after) from the last dim back; D is the third from last
    pads[4] = pads[5] = w.padding;
    x = op(n, "pad", {{"self", as_arg(x)}, {"pad", pads}, {"mode", std::string("constant")}, {"value", Scalar(pad_value)}});
  }
  const int64_t dim = int64_t(rank) - 3;
  ValueId acc = graph::kNoValue;
  for (int64_t j = 0; j < w.kernel; ++j) {
    const int64_t start = j * w.dilation;
    ValueId s = op(n, "slice", {{"self", as_arg(x)}, {"dim", num(dim)}, {"start", num(start)},
                                {"end", num(start + w.stride * (out_depth - 1) + 1)}, {"step", num(w.stride)}});
    acc = acc == graph::kNoValue ? s : binary(n, combine, acc, as_arg(s));
  }
  return acc;
}

// Input [N, C, D, H, W] or [C, D, H, W] as [N, C*D, H, W] for a 2-D pool, and the pooled result back.
ValueId fold_depth(AtenNode& n, ValueId x, int64_t& depth) {
  const Shape s = n.graph().value(x).meta.sizes;
  require(n, s.size() == 4 || s.size() == 5, fmt::format("expects a 4-D or 5-D input, got {}", shape_str(s)));
  depth = s[s.size() - 3];
  IntList shape(s.begin(), s.end() - 3);
  shape.back() *= depth;
  shape.insert(shape.end(), s.end() - 2, s.end());
  return reshape(n, x, shape);
}
ValueId unfold_depth(AtenNode& n, ValueId pooled, const Shape& in) {
  const Shape s = n.graph().value(pooled).meta.sizes;
  IntList shape(in.begin(), in.end() - 2);
  shape.insert(shape.end(), s.end() - 2, s.end());
  return reshape(n, pooled, shape);
}

void add_pools3d(Rows& r) {
  r["avg_pool3d.default"] = {[](AtenNode& n) {
    require(n, !n.has("divisor_override"), "divisor_override is not supported");
    const Shape in = meta_of(n, n.tensor("self")).sizes;
    const auto k = ints_k(n, "kernel_size", 3, {});
    const auto s = ints_k(n, "stride", 3, k), p = ints_k(n, "padding", 3, {0});
    const bool ceil_mode = n.bool_or("ceil_mode", false), include_pad = n.bool_or("count_include_pad", true);
    int64_t depth = 0;
    ValueId x = fold_depth(n, id_of(n.tensor("self")), depth);
    const DepthWindow w{k[0], s[0], p[0], 1};
    const int64_t out_depth = depth_out(n, depth, w, ceil_mode);
    x = op(n, "avg_pool2d", {{"self", as_arg(x)}, {"kernel_size", IntList{k[1], k[2]}}, {"stride", IntList{s[1], s[2]}},
                             {"padding", IntList{p[1], p[2]}}, {"ceil_mode", Scalar(ceil_mode)},
                             {"count_include_pad", Scalar(include_pad)}});
    ValueId sum = depth_window(n, unfold_depth(n, x, in), w, out_depth, 0.0, "add");
    if (include_pad || w.padding == 0) return std::vector<ValueId>{binary(n, "div", sum, num(w.kernel))};
    // The number of real (unpadded) depths in each window: the same window over ones.
    IntList ones_shape(in.size(), 1);
    ones_shape[in.size() - 3] = depth;
    ValueId ones = op(n, "ones", {{"size", ones_shape}, {"dtype", meta_of(n, n.tensor("self")).dtype}});
    return std::vector<ValueId>{binary(n, "div", sum, as_arg(depth_window(n, ones, w, out_depth, 0.0, "add")))};
  }, true};
  r["max_pool3d_with_indices.default"] = {[](AtenNode& n) {  // (values, indices): the indices are not computed
    const Shape in = meta_of(n, n.tensor("self")).sizes;
    const auto k = ints_k(n, "kernel_size", 3, {});
    const auto s = ints_k(n, "stride", 3, k), p = ints_k(n, "padding", 3, {0}), d = ints_k(n, "dilation", 3, {1});
    const bool ceil_mode = n.bool_or("ceil_mode", false);
    int64_t depth = 0;
    ValueId x = fold_depth(n, id_of(n.tensor("self")), depth);
    const DepthWindow w{k[0], s[0], p[0], d[0]};
    const int64_t out_depth = depth_out(n, depth, w, ceil_mode);
    x = op(n, "max_pool2d", {{"self", as_arg(x)}, {"kernel_size", IntList{k[1], k[2]}}, {"stride", IntList{s[1], s[2]}},
                             {"padding", IntList{p[1], p[2]}}, {"dilation", IntList{d[1], d[2]}}, {"ceil_mode", Scalar(ceil_mode)}});
    ValueId out = depth_window(n, unfold_depth(n, x, in), w, out_depth, -std::numeric_limits<double>::infinity(),
                               "maximum");
    return std::vector<ValueId>{out, graph::kNoValue};
  }, true};
  r["_adaptive_avg_pool3d.default"] = {[](AtenNode& n) {
    // Where each output size divides its input size: the mean over [.., Do, kd, Ho, kh, Wo, kw]'s kernel dims.
    const Shape in = meta_of(n, n.tensor("self")).sizes;
    const std::vector<int64_t> out = ints_k(n, "output_size", 3, {});
    require(n, in.size() == 4 || in.size() == 5, fmt::format("expects a 4-D or 5-D input, got {}", shape_str(in)));
    IntList split(in.begin(), in.end() - 3);
    for (size_t d = 0; d < 3; ++d) {
      const int64_t i = in[in.size() - 3 + d];
      require(n, out[d] > 0 && i % out[d] == 0, fmt::format("output size {} does not divide input size {} (kiln "
                                                            "maps adaptive pooling to a mean over equal windows)", out[d], i));
      split.insert(split.end(), {out[d], i / out[d]});
    }
    ValueId x = reshape(n, id_of(n.tensor("self")), split);
    return std::vector<ValueId>{op(n, "mean", {{"self", as_arg(x)}, {"dim", IntList{-5, -3, -1}}})};
  }, true};
}

// Batch statistics over every dim but the channels (dim 1): (out, mean [C], rstd [C]).
std::vector<ValueId> batch_norm_with_batch_stats(AtenNode& n) {
  const Shape in = meta_of(n, n.tensor("input")).sizes;
  require(n, in.size() >= 2, fmt::format("expects an input of at least 2 dims, got {}", shape_str(in)));
  const double eps = float_or(n, "eps", 1e-5);
  IntList dims = {0}, per_channel(in.size(), 1);
  for (size_t d = 2; d < in.size(); ++d) dims.push_back(int64_t(d));
  per_channel[1] = in[1];
  const Arg x = n.tensor("input");
  ValueId mean = op(n, "mean", {{"self", x}, {"dim", dims}, {"keepdim", Scalar(true)}});
  ValueId var = op(n, "var", {{"self", x}, {"dim", dims}, {"correction", num(0)}, {"keepdim", Scalar(true)}});
  ValueId rstd = unary(n, "rsqrt", binary(n, "add", var, Scalar(eps)));
  ValueId y = binary(n, "mul", op(n, "sub", {{"self", x}, {"other", as_arg(mean)}}), as_arg(rstd));
  if (n.has("weight")) y = binary(n, "mul", y, as_arg(reshape(n, id_of(n.tensor("weight")), per_channel)));
  if (n.has("bias")) y = binary(n, "add", y, as_arg(reshape(n, id_of(n.tensor("bias")), per_channel)));
  return {y, reshape(n, mean, {in[1]}), reshape(n, rstd, {in[1]})};
}

void add_norms(Rows& r) {
  r["_native_batch_norm_legit.no_stats"] = {[](AtenNode& n) {
    require(n, n.bool_or("training", true), "training=False needs running statistics, which this overload has none of");
    return batch_norm_with_batch_stats(n);
  }, true};
  r["_native_batch_norm_legit.default"] = {[](AtenNode& n) {
    // Training: the batch's statistics (updating the running ones is a buffer mutation, refused on its own).
    if (n.bool_or("training", false)) return batch_norm_with_batch_stats(n);
    ValueId out = n.emit1("batch_norm", {{"input", n.tensor("input")}, {"weight", n.has("weight") ? n.tensor("weight") : Arg()},
                                         {"bias", n.has("bias") ? n.tensor("bias") : Arg()},
                                         {"running_mean", n.tensor("running_mean")}, {"running_var", n.tensor("running_var")},
                                         {"training", Scalar(false)}, {"momentum", Scalar(float_or(n, "momentum", 0.1))},
                                         {"eps", Scalar(float_or(n, "eps", 1e-5))}});
    return std::vector<ValueId>{out, graph::kNoValue, graph::kNoValue};
  }, true};
}

// col2im (nn.Fold): the transposed convolution of the columns, as [N, C*kh*kw, Lh, Lw], with a one-hot weight
// per kernel position (eye(kh*kw) per channel, C groups): each column value lands where its patch sat.
ValueId col2im(AtenNode& n) {
  const Shape in = meta_of(n, n.tensor("self")).sizes;
  const DType dtype = meta_of(n, n.tensor("self")).dtype;
  const auto out = ints_k(n, "output_size", 2, {}), k = ints_k(n, "kernel_size", 2, {});
  const auto d = ints_k(n, "dilation", 2, {1}), p = ints_k(n, "padding", 2, {0}), s = ints_k(n, "stride", 2, {1});
  require(n, in.size() == 2 || in.size() == 3, fmt::format("expects a 2-D or 3-D input, got {}", shape_str(in)));
  const int64_t batch = in.size() == 3 ? in[0] : 1, rows = in[in.size() - 2], length = in.back(), window = k[0] * k[1];
  require(n, window > 0 && rows % window == 0, fmt::format("dim {} ({}) is not a multiple of kernel_size's product {}",
                                                           in.size() - 2, rows, window));
  int64_t blocks[2], output_padding[2];
  for (int i = 0; i < 2; ++i) {
    const int64_t span = out[size_t(i)] + 2 * p[size_t(i)] - d[size_t(i)] * (k[size_t(i)] - 1) - 1;
    require(n, span >= 0 && s[size_t(i)] > 0, "the kernel does not fit the output size");
    blocks[i] = span / s[size_t(i)] + 1;
    output_padding[i] = span % s[size_t(i)];
  }
  require(n, blocks[0] * blocks[1] == length, fmt::format("{} columns where output_size, kernel_size, dilation, padding "
                                                          "and stride give {}", length, blocks[0] * blocks[1]));
  const int64_t channels = rows / window;
  ValueId x = reshape(n, id_of(n.tensor("self")), {batch, rows, blocks[0], blocks[1]});
  ValueId w = reshape(n, op(n, "eye", {{"n", num(window)}, {"dtype", dtype}}), {window, 1, k[0], k[1]});
  w = op(n, "repeat", {{"self", as_arg(w)}, {"repeats", IntList{channels, 1, 1, 1}}});
  ValueId y = op(n, "convolution", {{"input", as_arg(x)}, {"weight", as_arg(w)}, {"bias", Arg()},
                                    {"stride", IntList(s)}, {"padding", IntList(p)}, {"dilation", IntList(d)},
                                    {"transposed", Scalar(true)}, {"output_padding", IntList{output_padding[0], output_padding[1]}},
                                    {"groups", num(channels)}});
  if (in.size() == 2) y = reshape(n, y, {channels, out[0], out[1]});
  return y;
}

// The p-norm of the last dim of `diff`: ATen's cdist/pdist cases (0: nonzeros, 1, 2, inf, general p).
ValueId p_norm_last_dim(AtenNode& n, ValueId diff, double p) {
  const DType dtype = n.graph().value(diff).meta.dtype;
  auto sum = [&](ValueId v) { return op(n, "sum", {{"self", as_arg(v)}, {"dim", IntList{-1}}}); };
  if (p == 0) return sum(cast(n, binary(n, "ne", diff, num(0)), dtype));
  ValueId a = unary(n, "abs", diff);
  if (p == 1) return sum(a);
  if (p == 2) return unary(n, "sqrt", sum(binary(n, "mul", diff, as_arg(diff))));
  if (std::isinf(p)) return op(n, "amax", {{"self", as_arg(a)}, {"dim", IntList{-1}}});
  return binary(n, "pow", sum(binary(n, "pow", a, Scalar(p))), Scalar(1.0 / p));
}

void add_distances_and_fold(Rows& r) {
  r["col2im.default"] = {[](AtenNode& n) { return std::vector<ValueId>{col2im(n)}; }, true};
  r["_cdist_forward.default"] = {[](AtenNode& n) {  // x1 [.., P, M], x2 [.., R, M] -> [.., P, R]
    const double p = float_or(n, "p", 2);
    require(n, p >= 0, fmt::format("p must be non-negative, got {}", p));
    ValueId a = op(n, "unsqueeze", {{"self", n.tensor("x1")}, {"dim", num(-2)}});
    ValueId b = op(n, "unsqueeze", {{"self", n.tensor("x2")}, {"dim", num(-3)}});
    return std::vector<ValueId>{p_norm_last_dim(n, binary(n, "sub", a, as_arg(b)), p)};
  }, true};
  r["_pdist_forward.default"] = {[](AtenNode& n) {  // self [N, M] -> the distances of rows i < j, row by row
    const double p = float_or(n, "p", 2);
    require(n, p >= 0, fmt::format("p must be non-negative, got {}", p));
    const Shape in = meta_of(n, n.tensor("self")).sizes;
    require(n, in.size() == 2, fmt::format("expects a 2-D input, got {}", shape_str(in)));
    graph::TensorListArg pieces;
    for (int64_t i = 0; i + 1 < in[0]; ++i) {
      ValueId row = op(n, "narrow", {{"self", n.tensor("self")}, {"dim", num(0)}, {"start", num(i)}, {"length", num(1)}});
      ValueId rest = op(n, "narrow", {{"self", n.tensor("self")}, {"dim", num(0)}, {"start", num(i + 1)},
                                      {"length", num(in[0] - i - 1)}});
      pieces.ids.push_back(p_norm_last_dim(n, binary(n, "sub", rest, as_arg(row)), p));
    }
    if (pieces.ids.empty()) return std::vector<ValueId>{op(n, "zeros", {{"size", IntList{0}}, {"dtype", meta_of(n, n.tensor("self")).dtype}})};
    return std::vector<ValueId>{op(n, "cat", {{"tensors", pieces}, {"dim", num(0)}})};
  }, true};
}

// grid_sampler_2d, bilinear or nearest, zeros or border padding, as ATen computes it (GridSampler.h): the
// grid unnormalised to pixel coordinates, then each corner gathered from [N, C, H*W] and weighted, a corner
// outside the image weighing 0.
struct Sampler {
  AtenNode& n;
  int64_t batch, channels, height, width, out_points;
  ValueId flat_input;

  // The pixel coordinate of grid component `c` (0: x over `size` columns, 1: y over rows).
  ValueId coordinate(int c, int64_t size, bool align_corners, bool border) {
    ValueId g = op(n, "select", {{"self", n.tensor("grid")}, {"dim", num(-1)}, {"index", num(c)}});
    g = reshape(n, g, {batch, out_points});
    ValueId plus1 = binary(n, "add", g, num(1));
    ValueId x = align_corners ? binary(n, "mul", binary(n, "div", plus1, num(2)), num(size - 1))
                              : binary(n, "div", binary(n, "sub", binary(n, "mul", plus1, num(size)), num(1)), num(2));
    if (border) x = op(n, "clamp", {{"self", as_arg(x)}, {"min", num(0)}, {"max", num(size - 1)}});
    return x;
  }
  // The values at integer pixel (x, y) (float tensors [N, P]), times `weight`, zero where outside the image.
  ValueId corner(ValueId x, ValueId y, ValueId weight) {
    ValueId inside = op(n, "logical_and", {{"self", as_arg(op(n, "logical_and", {{"self", as_arg(binary(n, "ge", x, num(0)))},
                                                                                  {"other", as_arg(binary(n, "le", x, num(width - 1)))}}))},
                                           {"other", as_arg(op(n, "logical_and", {{"self", as_arg(binary(n, "ge", y, num(0)))},
                                                                                  {"other", as_arg(binary(n, "le", y, num(height - 1)))}}))}});
    auto index_of = [&](ValueId v, int64_t size) {
      return cast(n, op(n, "clamp", {{"self", as_arg(v)}, {"min", num(0)}, {"max", num(size - 1)}}), DType::I64);
    };
    ValueId flat = binary(n, "add", binary(n, "mul", index_of(y, height), num(width)), as_arg(index_of(x, width)));
    flat = op(n, "expand", {{"self", as_arg(op(n, "unsqueeze", {{"self", as_arg(flat)}, {"dim", num(1)}}))},
                            {"size", IntList{batch, channels, out_points}}});
    ValueId values = op(n, "gather", {{"self", as_arg(flat_input)}, {"dim", num(2)}, {"index", as_arg(flat)}});
    ValueId w = op(n, "where", {{"condition", as_arg(inside)}, {"self", as_arg(weight)}, {"other", num(0)}});
    return binary(n, "mul", values, as_arg(op(n, "unsqueeze", {{"self", as_arg(w)}, {"dim", num(1)}})));
  }
};

ValueId grid_sampler_2d(AtenNode& n) {
  const int64_t mode = n.int_or("interpolation_mode", 0), padding = n.int_or("padding_mode", 0);
  require(n, mode == 0 || mode == 1, "interpolation_mode 'bicubic' is not supported (bilinear and nearest are)");
  require(n, padding == 0 || padding == 1, "padding_mode 'reflection' is not supported (zeros and border are)");
  const Shape in = meta_of(n, n.tensor("input")).sizes, grid = meta_of(n, n.tensor("grid")).sizes;
  require(n, in.size() == 4 && grid.size() == 4 && grid[3] == 2 && grid[0] == in[0],
          fmt::format("expects input [N, C, H, W] and grid [N, H_out, W_out, 2], got {} and {}", shape_str(in), shape_str(grid)));
  const bool align = n.bool_or("align_corners", false);
  Sampler s{n, in[0], in[1], in[2], in[3], grid[1] * grid[2], graph::kNoValue};
  s.flat_input = reshape(n, id_of(n.tensor("input")), {in[0], in[1], in[2] * in[3]});
  ValueId x = s.coordinate(0, in[3], align, padding == 1), y = s.coordinate(1, in[2], align, padding == 1);
  ValueId out = graph::kNoValue;
  if (mode == 1) {
    ValueId one = op(n, "ones_like", {{"self", as_arg(x)}});
    out = s.corner(unary(n, "round", x), unary(n, "round", y), one);
  } else {
    ValueId x0 = unary(n, "floor", x), y0 = unary(n, "floor", y);
    ValueId x1 = binary(n, "add", x0, num(1)), y1 = binary(n, "add", y0, num(1));
    ValueId wx1 = binary(n, "sub", x, as_arg(x0)), wx0 = binary(n, "sub", x1, as_arg(x));
    ValueId wy1 = binary(n, "sub", y, as_arg(y0)), wy0 = binary(n, "sub", y1, as_arg(y));
    const std::pair<ValueId, ValueId> xs[2] = {{x0, wx0}, {x1, wx1}}, ys[2] = {{y0, wy0}, {y1, wy1}};
    for (const auto& [yc, wy] : ys)
      for (const auto& [xc, wx] : xs) {
        ValueId c = s.corner(xc, yc, binary(n, "mul", wx, as_arg(wy)));
        out = out == graph::kNoValue ? c : binary(n, "add", out, as_arg(c));
      }
  }
  return reshape(n, out, {in[0], in[1], grid[1], grid[2]});
}

void add_sampling(Rows& r) {
  r["grid_sampler_2d.default"] = {[](AtenNode& n) { return std::vector<ValueId>{grid_sampler_2d(n)}; }, true};
  r["randperm.default"] = {[](AtenNode& n) {
    // A uniformly random permutation: the order that sorts n uniform draws (kiln's generator, not PyTorch's).
    const int64_t count = n.int_or("n", 0);
    require(n, count >= 0, fmt::format("n must be non-negative, got {}", count));
    DType dtype = DType::I64;
    if (n.has("dtype")) {
      ArgSpec spec;
      spec.type = ArgType::DType;
      dtype = std::get<DType>(n.convert("dtype", n.arg("dtype"), spec));
    }
    ValueId draws = op(n, "rand", {{"size", IntList{count}}, {"dtype", DType::F64}});
    ValueId order = op(n, "argsort", {{"self", as_arg(draws)}, {"dim", num(0)}});
    return std::vector<ValueId>{dtype == DType::I64 ? order : cast(n, order, dtype)};
  }, true};
}

}  // namespace

void add_core_aten_gaps(std::map<std::string, AtenRow, std::less<>>& rows) {
  add_scatters(rows);
  rows["_embedding_bag.default"] = {embedding_bag, true};
  rows["_embedding_bag_forward_only.default"] = {embedding_bag, true};
  add_pools3d(rows);
  add_norms(rows);
  add_distances_and_fold(rows);
  add_sampling(rows);
}

}  // namespace kiln::importer
