// The type-directed graph generator (fuzz/generator.h). Each node: pick an op row, draw every schema argument
// by its type with hints from its name, and let the op's shape inference (Graph::add_op) accept or refuse the
// call; a refused call is redrawn up to GenOptions::attempts_per_node times. Choice 0 is always the simplest
// answer (the schema default, f32, size 1, the first tensor's shape), so shrinking a choice simplifies a graph.
#include "fuzz/generator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "core/error.h"
#include "core/escape.h"
#include "autograd/autograd.h"
#include "eager/philox.h"
#include "fuzz/domains.h"
#include "graph/rewrite.h"
#include "ops/api.h"
#include "ops/dispatch.h"

namespace kiln::fuzz {
namespace {

using graph::Arg;
using graph::Graph;
using graph::TensorArg;
using graph::TensorListArg;
using graph::ValueId;

constexpr DType kDtypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64,
                             DType::I32, DType::I16, DType::I8,   DType::U8,  DType::Bool};
// Sizes off the vector width (16 f32 lanes of AVX-512, 8 of AVX2) and around it.
constexpr int64_t kOddSizes[] = {7, 9, 15, 17, 31, 33, 65};

bool one_of(std::string_view s, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), s) != names.end();
}

// What the argument drawing of one node knows so far.
struct NodeContext {
  bool spatial = false;  // the op takes image geometry (`stride`, `kernel_size`, `output_size`): NCHW tensors
  std::optional<TensorMeta> first, previous;  // the first and the latest tensor argument
  IntList last_ints;                          // the latest int[] argument (as_strided's size before its stride)
  int64_t rank() const { return first ? int64_t(first->sizes.size()) : 0; }
};

bool all_finite(const Tensor& t) {
  if (!is_floating(t.dtype()) || t.numel() == 0) return true;
  Tensor f = contiguous(to(t, DType::F64));
  const double* p = f.data<double>();
  return std::all_of(p, p + f.numel(), [](double x) { return std::isfinite(x); });
}

class Builder {
 public:
  Builder(Choices& c, const GenOptions& o) : graph_choices_(c), o_(o) {}

  FuzzCase build() {
    start();
    const int target = int(c().in_range(1, std::max(1, o_.max_nodes)));
    for (int tries = 0; g_.num_op_nodes() < target && tries < 4 * target + 8; ++tries) add_random_node();
    return finish();
  }

  // One node per seed, each drawn from its own stream: removing a seed removes its node and leaves the
  // others' draws as they were (what RapidCheck's shrinking of a list needs).
  FuzzCase build_from_node_seeds(const std::vector<uint64_t>& seeds) {
    start();
    for (size_t k = 0; k < seeds.size() && g_.num_op_nodes() < std::max(1, o_.max_nodes); ++k) {
      SeededChoices node(seeds[k], 0);
      node_choices_ = &node;
      add_random_node();
      node_choices_ = nullptr;
    }
    return finish();
  }

 private:
  void start() { input_seed_ = c().below(uint64_t(1) << 32); }

  void add_random_node() {
    static const std::vector<OpId> every_op = all_op_ids();
    const std::vector<OpId>& ops = o_.ops.empty() ? every_op : o_.ops;
    NoGradGuard no_grad;
    try_node(op_info(ops[size_t(c().below(ops.size()))]));
  }

  FuzzCase finish() {
    NoGradGuard no_grad;
    if (g_.num_op_nodes() == 0) {  // every draw refused (a narrow --ops): one clone keeps the graph non-empty
      ValueId x = fresh_input({2}, DType::F32);
      add_node(op_info(OpId::clone), {TensorArg{x}}, g_.nodes().size());
    }
    finish_outputs();
    FuzzCase fc;
    fc.input_seed = input_seed_;
    for (ValueId v : graph::used_inputs(g_)) fc.inputs.push_back(inputs_.at(size_t(v)));
    fc.graph = graph::without_unused_inputs(g_);
    fc.refused = std::move(refused_);
    return fc;
  }

  static std::vector<OpId> all_op_ids() {
    std::vector<OpId> ids;
    for (const OpInfo& op : all_ops()) ids.push_back(op.id);
    return ids;
  }

  // ---- shapes and dtypes
  int64_t draw_size() {
    uint64_t r = c().below(100);
    if (r < 55) return 1 + int64_t(r % 4);
    if (r < 70) return 1;
    if (r < 78) return 0;
    if (r < 90) return c().in_range(5, 8);
    return kOddSizes[c().below(std::size(kOddSizes))];
  }
  Shape draw_shape(int64_t max_rank = 4) {
    Shape s(size_t(c().in_range(0, max_rank)));
    for (int64_t& x : s) x = draw_size();
    return s;
  }
  // f32 40%, f16, bf16 and f64 10% each, each integer dtype and bool 5%.
  DType draw_dtype() {
    const uint64_t r = c().below(20);
    return r < 8 ? DType::F32 : r < 14 ? kDtypes[1 + (r - 8) / 2] : kDtypes[4 + (r - 14)];
  }

  // A graph input; non-contiguous a fifth of the time: a dense permuted layout (column-major, or the last
  // two dims swapped). Never with gaps between elements: what a gap holds is not part of an input's value
  // (a .npy file has no room for it), yet as_strided can read it. Gapped views come from slice nodes instead.
  ValueId fresh_input(const Shape& sizes, DType dt, int64_t index_bound = 0) {
    Shape strides = contiguous_strides(sizes);
    if (sizes.size() >= 2 && c().chance(20)) {
      std::vector<size_t> order(sizes.size());  // dims from the innermost outwards
      std::iota(order.begin(), order.end(), 0);
      if (c().chance(50)) std::swap(order[0], order[1]);  // the last two dims swapped
      else std::reverse(order.begin(), order.end());     // column-major
      int64_t s = 1;
      for (size_t k = 0; k < order.size(); ++k) {
        const size_t d = sizes.size() - 1 - order[k];
        strides[d] = s;
        s *= std::max<int64_t>(sizes[d], 1);
      }
    }
    ValueId v = g_.add_input(g_.fresh_name("x"), TensorMeta{dt, sizes, strides, {}});
    Tensor value = input_value(g_.value(v).meta, input_seed_ + uint64_t(v), index_bound);
    store(inputs_, v, value);
    store(env_, v, clone(value));  // in-place nodes write into env_, never into the inputs handed out
    return v;
  }
  static void store(std::vector<Tensor>& where, ValueId v, const Tensor& t) {
    if (where.size() <= size_t(v)) where.resize(size_t(v) + 1);
    where[size_t(v)] = t;
  }

  const TensorMeta& meta(ValueId v) const { return g_.value(v).meta; }

  // A pool value with exactly these sizes, if any.
  std::optional<ValueId> pool_with_shape(const Shape& s) {
    std::vector<ValueId> match;
    for (ValueId v : pool_)
      if (meta(v).sizes == s) match.push_back(v);
    if (match.empty()) return std::nullopt;
    return match[c().below(match.size())];
  }

  // ---- tensor arguments
  static bool is_index_argument(std::string_view name) { return one_of(name, {"index", "indices", "target"}); }

  ValueId first_tensor(const NodeContext& ctx) {
    if (ctx.spatial && c().chance(60)) {
      Shape s(4);
      for (int64_t& x : s) x = c().in_range(1, 5);
      return fresh_input(s, draw_dtype());
    }
    if (!pool_.empty() && c().below(10) < 7) return pool_[pool_.size() - 1 - c().below(std::min<size_t>(pool_.size(), 6))];
    return fresh_input(draw_shape(), draw_dtype());
  }

  // An integer tensor of indices: a fresh input with values below the first tensor's smallest size, which is
  // a valid index into any of its dims (index_select, gather, scatter, index, embedding, class targets).
  ValueId index_tensor(const NodeContext& ctx) {
    const Shape first = ctx.first ? ctx.first->sizes : Shape{};
    int64_t bound = first.empty() ? 1 : *std::min_element(first.begin(), first.end());
    Shape s;
    switch (c().below(5)) {
      case 0: s = first; break;
      case 1:  // no larger than the first tensor in every dim (gather, scatter)
        s = first;
        for (int64_t& x : s) x = c().in_range(std::min<int64_t>(x, 1), x);
        break;
      case 2: s = {c().in_range(0, 5)}; break;  // a list of indices (index_select, index, embedding)
      case 3:  // the first shape without dim 1 (class targets of [N, C] or [N, C, d] scores)
        s = first;
        if (s.size() >= 2) s.erase(s.begin() + 1);
        else s.clear();
        break;
      default: s = draw_shape(3);
    }
    return fresh_input(s, DType::I64, std::max<int64_t>(bound, 1));
  }

  Shape related_shape(const NodeContext& ctx, uint64_t strategy) {
    const Shape first = ctx.first ? ctx.first->sizes : Shape{};
    const Shape prev = ctx.previous ? ctx.previous->sizes : first;
    const int64_t last = prev.empty() ? 1 : prev.back();
    switch (strategy) {
      case 0: return first;
      case 1: {  // broadcastable to the first: a suffix with some dims turned into 1
        Shape s(first.end() - std::ptrdiff_t(c().in_range(0, int64_t(first.size()))), first.end());
        for (int64_t& x : s)
          if (c().chance(30)) x = 1;
        return s;
      }
      case 2: {  // a matrix-product partner of the previous: [.., last, n]
        Shape s = prev.size() >= 3 ? Shape{prev[0], last, draw_size()} : Shape{last, draw_size()};
        return s;
      }
      case 3: return {draw_size(), last};  // a linear layer's weight [out, in]
      case 4: return {first.empty() ? 1 : first.size() >= 2 && c().chance(50) ? first[1] : first.back()};  // norms
      case 5: {  // same rank as the previous, no larger in any dim (pool windows)
        Shape s = prev;
        for (int64_t& x : s) x = c().in_range(std::min<int64_t>(x, 1), x);
        return s;
      }
      case 6: {  // a convolution's weight [O, C, k, k] for an input [N, C, H, W] (forward) or for a gradient
                 // [N, O, H, W] (backward), with k no larger than H and W
        if (first.size() != 4) return draw_shape();
        const int64_t k = c().in_range(1, std::max<int64_t>(1, std::min({first[2], first[3], int64_t(3)})));
        return c().chance(50) ? Shape{draw_size(), first[1], k, k} : Shape{first[1], draw_size(), k, k};
      }
      case 7: {  // a convolution's input [N, C, H + k - 1, W + k - 1] for a gradient [N, O, H, W]
        if (first.size() != 4) return draw_shape();
        const int64_t k = c().in_range(0, 2);
        return Shape{first[0], draw_size(), first[2] + k, first[3] + k};
      }
      default: return draw_shape();
    }
  }

  ValueId other_tensor(const NodeContext& ctx) {
    uint64_t strategy = ctx.spatial && c().chance(50) ? 6 + c().below(2) : c().below(10);
    if (strategy == 8 && !pool_.empty()) return pool_[c().below(pool_.size())];
    Shape s = related_shape(ctx, strategy);
    if (strategy <= 1 && c().chance(50))
      if (auto v = pool_with_shape(s)) return *v;
    DType dt = ctx.first && !c().chance(15) ? ctx.first->dtype : draw_dtype();
    return fresh_input(s, dt);
  }

  Arg tensor_arg(const OpInfo& op, const ArgSpec& a, NodeContext& ctx) {
    if (a.optional && !c().chance(60)) return std::monostate{};
    ValueId v;
    if (op.id == OpId::philox_rand) v = fresh_input({}, DType::I64);  // seed, offset: one-element integer words
    else if (is_index_argument(a.name) && ctx.first) v = index_tensor(ctx);
    else if (!ctx.first) v = first_tensor(ctx);
    else {
      if (op.kind == OpKind::Pointwise && c().chance(10)) {  // a wrapped number (`add(%x, 2.5)`)
        if (o_.domains && domain_of(op, a.name) != Domain::Any) return Scalar(0.5);  // inside every domain
        return c().chance(50) ? Scalar(double(c().in_range(-4, 4)) / 2) : Scalar(c().in_range(-3, 3));
      }
      v = other_tensor(ctx);
    }
    (ctx.first ? ctx.previous : ctx.first) = meta(v);
    if (!ctx.previous) ctx.previous = ctx.first;
    return TensorArg{v};
  }

  Arg tensor_list_arg(const ArgSpec& a, NodeContext& ctx) {
    TensorListArg list;
    if (a.type == ArgType::OptTensorList) {  // index(self, [i0, None, i2]): integer index tensors
      if (!ctx.first) return list;
      int64_t n = c().in_range(1, std::max<int64_t>(ctx.rank(), 1));
      for (int64_t i = 0; i < n; ++i)
        list.ids.push_back(i > 0 && c().chance(30) ? graph::kNoValue
                                                  : fresh_input({c().in_range(0, 4)}, DType::I64, min_size(*ctx.first)));
      return list;
    }
    ValueId first = first_tensor(ctx);
    ctx.first = ctx.previous = meta(first);
    list.ids.push_back(first);
    for (int64_t i = 0, n = c().in_range(0, 2); i < n; ++i) {
      Shape s = meta(first).sizes;
      if (!s.empty() && c().chance(40)) s[c().below(s.size())] = draw_size();  // cat along that dim
      DType dt = c().chance(85) ? meta(first).dtype : draw_dtype();
      std::optional<ValueId> reuse = c().chance(40) ? pool_with_shape(s) : std::nullopt;
      list.ids.push_back(reuse ? *reuse : fresh_input(s, dt));
    }
    return list;
  }

  static int64_t min_size(const TensorMeta& m) {
    return m.sizes.empty() ? 1 : std::max<int64_t>(1, *std::min_element(m.sizes.begin(), m.sizes.end()));
  }

  // ---- non-tensor arguments
  int64_t any_dim(const NodeContext& ctx) {
    int64_t r = std::max<int64_t>(ctx.rank(), 1);
    int64_t d = c().in_range(0, r - 1);
    return c().chance(30) ? d - r : d;
  }
  IntList distinct_dims(const NodeContext& ctx, int64_t count) {
    std::vector<int64_t> free(size_t(std::max<int64_t>(ctx.rank(), 1)));
    std::iota(free.begin(), free.end(), 0);
    IntList out;
    for (int64_t i = 0; i < count && !free.empty(); ++i) {
      size_t k = c().below(free.size());
      out.push_back(free[k]);
      free.erase(free.begin() + std::ptrdiff_t(k));
    }
    return out;
  }
  // A shape with the first tensor's element count: its sizes with dims merged, split, or one of them -1.
  IntList same_numel_shape(const NodeContext& ctx) {
    IntList s = ctx.first ? ctx.first->sizes : IntList{};
    switch (c().below(4)) {
      case 0: if (s.size() >= 2) { size_t i = c().below(s.size() - 1); s[i] *= s[i + 1]; s.erase(s.begin() + std::ptrdiff_t(i) + 1); } break;
      case 1: s.insert(s.begin() + std::ptrdiff_t(c().below(s.size() + 1)), 1); break;
      case 2: if (!s.empty()) s[c().below(s.size())] = -1; break;
      default: { int64_t n = ctx.first ? shape_numel(ctx.first->sizes) : 1; s = {n}; }
    }
    return s;
  }
  // expand's target: the first shape with size-1 dims widened and maybe a leading dim.
  IntList expanded_shape(const NodeContext& ctx) {
    IntList s = ctx.first ? ctx.first->sizes : IntList{};
    for (int64_t& x : s)
      if (x == 1 && c().chance(50)) x = draw_size();
      else if (c().chance(10)) x = -1;
    if (c().chance(40)) s.insert(s.begin(), draw_size());
    return s;
  }
  IntList small_ints(int64_t n, int64_t lo, int64_t hi) {
    IntList out(size_t(std::max<int64_t>(n, 0)));
    for (int64_t& x : out) x = c().in_range(lo, hi);
    return out;
  }

  IntList int_list(const ArgSpec& a, NodeContext& ctx) {
    const std::string& n = a.name;
    const int64_t r = ctx.rank();
    if (n == "dims" && c().chance(60)) return distinct_dims(ctx, r);  // permute
    if (one_of(n, {"dim", "dims"})) return distinct_dims(ctx, c().in_range(0, std::max<int64_t>(r, 1)));
    if (one_of(n, {"size", "shape"})) {
      switch (c().below(4)) {
        case 0: return same_numel_shape(ctx);
        case 1: return expanded_shape(ctx);
        default: return draw_shape(3);
      }
    }
    if (n == "stride") {
      if (!ctx.last_ints.empty() && c().chance(70)) {  // as_strided: contiguous strides, maybe one zero
        IntList s = contiguous_strides(ctx.last_ints);
        if (!s.empty() && c().chance(30)) s[c().below(s.size())] = 0;
        return s;
      }
      return c().chance(30) ? IntList{} : c().chance(50) ? small_ints(2, 1, 2) : IntList{1, 1};
    }
    if (n == "repeats") return small_ints(r + c().in_range(0, 1), 1, 3);
    if (n == "pad") return small_ints(2 * c().in_range(1, std::max<int64_t>(1, std::min<int64_t>(r, 3))), 0, 2);
    if (n == "shifts") return small_ints(c().in_range(1, std::max<int64_t>(r, 1)), -3, 3);
    if (n == "normalized_shape")
      return ctx.first ? IntList(ctx.first->sizes.end() - std::ptrdiff_t(c().in_range(std::min<int64_t>(r, 1), r)),
                                 ctx.first->sizes.end())
                       : IntList{};
    if (n == "kernel_size") return IntList(2, c().in_range(1, 3));
    if (n == "padding") return IntList(2, c().chance(40) ? 1 : 0);
    if (n == "dilation") return IntList(2, c().chance(30) ? 2 : 1);
    if (n == "output_padding") return IntList(2, c().chance(20) ? 1 : 0);  // convolution (transposed)
    if (n == "output_size") return small_ints(2, 1, 6);                     // upsample_*2d
    // Convolution backward (stride 1, no padding, no dilation): the forward's input size from the gradient
    // [N, O, Ho, Wo] and the weight [O, C, k, k]; the weight size from the gradient and the input [N, C, H, W].
    if (one_of(n, {"input_size", "weight_size"}) && ctx.first && ctx.previous && ctx.first->sizes.size() == 4 &&
        ctx.previous->sizes.size() == 4) {
      const Shape& go = ctx.first->sizes;
      const Shape& other = ctx.previous->sizes;
      if (n == "input_size") return {go[0], other[1], go[2] + other[2] - 1, go[3] + other[3] - 1};
      return {go[1], other[1], other[2] - go[2] + 1, other[3] - go[3] + 1};
    }
    return small_ints(c().in_range(0, std::max<int64_t>(r, 1)), -1, 4);
  }

  int64_t int_value(const ArgSpec& a, const NodeContext& ctx) {
    const std::string& n = a.name;
    if (one_of(n, {"dim", "dim0", "dim1", "dim2", "start_dim", "end_dim"})) return any_dim(ctx);
    if (n == "reduction") return c().in_range(0, 2);
    if (n == "groups") return c().chance(40) ? c().in_range(2, 3) : 1;
    if (one_of(n, {"steps", "n", "m", "chunks", "split_size", "length"})) return c().in_range(0, 6);
    if (n == "low") return c().in_range(-5, 5);
    if (n == "high") return c().in_range(-4, 10);
    return c().in_range(-3, 6);
  }

  Scalar scalar_value(const ArgSpec& a) {
    static const double kNumbers[] = {1, 0, -1, 2, 0.5, -1.5, 3, 0.25};
    double v = kNumbers[c().below(std::size(kNumbers))];
    if (a.name == "step" && v == 0) v = 1;
    return v == std::floor(v) && c().chance(50) ? Scalar(int64_t(v)) : Scalar(v);
  }

  double float_value(const ArgSpec& a) {
    const std::string& n = a.name;
    if (n == "eps") return c().chance(50) ? 1e-5 : 1e-3;
    if (one_of(n, {"p", "label_smoothing", "momentum"})) return double(c().in_range(0, 4)) / 5;
    static const double kNumbers[] = {0, 0.1, 0.5, 1, 2, -1};
    return kNumbers[c().below(std::size(kNumbers))];
  }

  std::string string_value(const ArgSpec& a) {
    if (a.name == "approximate") return c().chance(50) ? "tanh" : "none";
    if (a.name == "rounding_mode") return c().chance(50) ? "floor" : "trunc";
    if (a.name == "mode") {
      static const char* kModes[] = {"constant", "reflect", "replicate", "circular"};
      return kModes[c().below(4)];
    }
    return a.default_value && a.default_value->is_string() ? a.default_value->string() : std::string();
  }

  Arg default_arg(const ArgSpec& a) {
    const IValue& d = *a.default_value;
    if (d.is_none()) return std::monostate{};
    if (d.is_int_list()) return d.int_list();
    if (d.is_string()) return d.string();
    if (d.is_dtype()) return d.dtype();
    return d.scalar();
  }

  Arg draw_arg(const OpInfo& op, const ArgSpec& a, NodeContext& ctx) {
    if (a.type == ArgType::Tensor) return tensor_arg(op, a, ctx);
    if (a.type == ArgType::TensorList || a.type == ArgType::OptTensorList) return tensor_list_arg(a, ctx);
    if (a.default_value && !c().chance(55)) return default_arg(a);
    if (a.optional && c().chance(25)) return std::monostate{};
    switch (a.type) {
      case ArgType::Int: return Scalar(int_value(a, ctx));
      case ArgType::IntList: return ctx.last_ints = int_list(a, ctx);
      case ArgType::Scalar: return scalar_value(a);
      case ArgType::Float: return Scalar(float_value(a));
      case ArgType::Bool: return Scalar(c().chance(50));
      case ArgType::DType: return draw_dtype();
      case ArgType::Str: return string_value(a);
      default: return std::monostate{};
    }
  }

  // ---- nodes
  void try_node(const OpInfo& op) {
    for (int attempt = 0; attempt < o_.attempts_per_node; ++attempt) {
      const size_t first_new = g_.nodes().size();
      NodeContext ctx;
      for (const ArgSpec& a : op.schema.args) ctx.spatial |= one_of(a.name, {"stride", "kernel_size", "output_size"});
      std::vector<Arg> args;
      for (const ArgSpec& a : op.schema.args) args.push_back(draw_arg(op, a, ctx));
      if (o_.domains) guard_arguments(op, args);
      if (add_node(op, std::move(args), first_new)) return;
    }
  }

  // Puts a guard (domains.h) in front of every tensor argument that has a domain. A guard that its value's
  // dtype refuses (shape inference) leaves that argument unguarded.
  void guard_arguments(const OpInfo& op, std::vector<Arg>& args) {
    for (size_t i = 0; i < args.size(); ++i) {
      auto* t = std::get_if<TensorArg>(&args[i]);
      Domain d = t ? domain_of(op, op.schema.args[i].name) : Domain::Any;
      if (d == Domain::Any) continue;
      try {
        t->id = guard_value(g_, t->id, d);
      } catch (const Error&) {
      }
    }
  }

  // Appends the node after the guards appended since node `first_new`, and runs them all on the concrete
  // values: a call that shape inference accepts but the kernel refuses (an index out of range, an in-place
  // result that would grow its output, ...) is taken back with its guards and recorded in `refused_`.
  bool add_node(const OpInfo& op, std::vector<Arg> args, size_t first_new) {
    try {
      g_.add_op(op.id, std::move(args));
    } catch (const Error&) {
      take_back(first_new);
      return false;
    }
    if (g_.num_op_nodes() > std::max(1, o_.max_nodes)) return take_back(first_new), false;  // guards included
    for (size_t i = first_new; i < g_.nodes().size(); ++i) {
      const graph::Node& n = g_.nodes()[i];
      for (ValueId v : n.outputs) {
        const Shape& sizes = meta(v).sizes;
        // Sizes outside 0..2^40 are never a valid value (docs/kir-format.md: the printed graph would not parse).
        if (std::any_of(sizes.begin(), sizes.end(), [](int64_t x) { return x < 0 || x > (int64_t(1) << 40); })) {
          refused_.push_back(fmt::format("{}: shape inference gave sizes {}, outside 0..2^40", n.info().name,
                                         shape_str(sizes)));
          return take_back(first_new), false;
        }
        if (shape_numel(sizes) > o_.max_numel) return take_back(first_new), false;
      }
      try {
        std::vector<Tensor> outs = dispatch(bind_args(n.info(), graph::node_ivalues(g_, n, env_)));
        for (size_t k = 0; k < outs.size() && k < n.outputs.size(); ++k) store(env_, n.outputs[k], outs[k]);
        // Every value so far is finite; a node that makes NaN or Inf of them (a mean over nothing, an f16
        // overflow) is drawn again, so NaN and Inf do not drown real mismatches (--allow-nan keeps it).
        if (o_.domains && std::any_of(outs.begin(), outs.end(), [](const Tensor& t) { return !all_finite(t); }))
          return take_back(first_new), false;
      } catch (const Error& e) {
        refused_.push_back(fmt::format("{}: {}", n.info().name, e.what()));
        return take_back(first_new), false;
      }
    }
    for (size_t i = first_new; i < g_.nodes().size(); ++i)
      pool_.insert(pool_.end(), g_.nodes()[i].outputs.begin(), g_.nodes()[i].outputs.end());
    return true;
  }

  void take_back(size_t first_new) {
    std::vector<bool> dead(g_.nodes().size(), false);
    std::fill(dead.begin() + std::ptrdiff_t(first_new), dead.end(), true);
    graph::erase_nodes(g_, dead);
  }

  // Every op result nothing reads is an output (so no node is dead), and so is every in-place result. (Inputs
  // nothing reads are dropped by finish().)
  void finish_outputs() {
    std::vector<std::vector<int>> users = g_.users();
    std::vector<ValueId> outs;
    for (const graph::Node& n : g_.nodes())
      for (ValueId v : n.outputs)
        if (users[size_t(v)].empty() || n.info().is_inplace()) outs.push_back(v);
    g_.set_outputs(outs);
  }

  Choices& graph_choices_;
  Choices* node_choices_ = nullptr;  // while building one node from its own stream (generate_from_node_seeds)
  Choices& c() { return node_choices_ ? *node_choices_ : graph_choices_; }
  const GenOptions& o_;
  Graph g_;
  std::vector<ValueId> pool_;  // values later nodes may read
  uint64_t input_seed_ = 0;
  std::vector<Tensor> inputs_, env_;  // by value id: the inputs' values as handed out; every value computed
  std::vector<std::string> refused_;
};

}  // namespace

Tensor input_value(const TensorMeta& m, uint64_t seed, int64_t index_bound) {
  SeededChoices r(seed, 0x5eed);
  std::vector<double> values(size_t(shape_numel(m.sizes)));
  for (double& x : values) {
    if (index_bound > 0) x = double(r.below(uint64_t(index_bound)));
    else if (m.dtype == DType::Bool) x = double(r.below(2));
    else if (!is_floating(m.dtype)) x = double(r.below(10));
    else {  // Box-Muller
      const double u1 = (double(r.below(uint64_t(1) << 30)) + 1) / double((uint64_t(1) << 30) + 1);
      const double u2 = double(r.below(uint64_t(1) << 30)) / double(uint64_t(1) << 30);
      x = std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
    }
  }
  NoGradGuard no_grad;
  Tensor out = Tensor::empty_strided(m.sizes, m.strides, m.dtype);
  if (!values.empty()) copy_(out, to(Tensor::from_vector<double>(values, m.sizes), m.dtype));
  return out;
}

namespace {
// The builder runs every node on concrete values, random ops included: they draw from a generator state fixed
// for the graph (and restored after), so which nodes their values let through depends on the seed alone, not
// on what the process drew before.
class FixedGeneratorState {
 public:
  FixedGeneratorState() : saved_(default_generator()) { default_generator() = GeneratorState{}; }
  ~FixedGeneratorState() { default_generator() = saved_; }
  FixedGeneratorState(const FixedGeneratorState&) = delete;
  FixedGeneratorState& operator=(const FixedGeneratorState&) = delete;

 private:
  GeneratorState saved_;
};
}  // namespace

FuzzCase generate(Choices& choices, const GenOptions& opts) {
  FixedGeneratorState fixed;
  return Builder(choices, opts).build();
}

FuzzCase generate_from_node_seeds(uint64_t graph_seed, const std::vector<uint64_t>& node_seeds,
                                  const GenOptions& opts) {
  FixedGeneratorState fixed;
  SeededChoices c(graph_seed, 0);
  return Builder(c, opts).build_from_node_seeds(node_seeds);
}

FuzzCase generate_indexed(uint64_t seed, uint64_t index, const GenOptions& opts) {
  SeededChoices c(seed, index);
  return generate(c, opts);
}

std::vector<OpId> parse_op_list(const std::string& list) {
  KILN_CHECK(!list.empty(), "--ops: the list is empty; name the ops to draw nodes from (comma-separated, `kiln ops` "
             "lists them), or leave --ops out for every op of the table");
  std::vector<OpId> ops;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = std::min(list.find(',', start), list.size());
    std::string name = list.substr(start, comma - start);
    const OpInfo* op = find_op(name);
    KILN_CHECK(op, "--ops: unknown op '{}'; expected comma-separated op names of the table (`kiln ops` lists them)",
               terminal_safe(name));
    ops.push_back(op->id);
    start = comma + 1;
  }
  return ops;
}

std::vector<CoverageKey> coverage_keys(const graph::Graph& g) {
  std::vector<CoverageKey> keys;
  for (const graph::Node& n : g.nodes()) {
    if (n.kind != graph::NodeKind::Op) continue;
    std::vector<ValueId> ins = Graph::node_inputs(n);
    const ValueId v = ins.empty() ? n.outputs.at(0) : ins[0];
    keys.push_back({n.op, g.value(v).meta.dtype});
  }
  return keys;
}

}  // namespace kiln::fuzz
