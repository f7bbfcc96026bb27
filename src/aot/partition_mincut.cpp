// Min-cut rematerialisation (functorch's min_cut_rematerialization_partition): the saved values are a minimum
// cut, found by max-flow (Boost.Graph's Boykov-Kolmogorov), of a flow graph in which each forward-side value
// is an edge weighted by its byte size, the primals and the values that must not be recomputed hang off the
// source, and the backward hangs off the sink. Everything the backward needs beyond the cut is recomputed
// there. The bans (extern kernels and random ops; values a backward user cannot fuse; the distance rule; the
// 4x-smaller-output rule) and the weights (1.1^distance to the backward, doubled for values that fusion would
// never write to memory) follow functorch; docs/partitioners.md walks through them.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

// Boost 1.74's adjacency list trips GCC 12's -Wmaybe-uninitialized inside its own headers.
// (clang has no such warning.)
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>
#pragma GCC diagnostic pop

#include "aot/partition_impl.h"
#include "core/error.h"

namespace kiln::aot {

using graph::Graph;
using graph::Node;
using graph::NodeKind;
using graph::ValueId;

namespace {

// ---------------------------------------------------------------- the flow network (Boost.Graph)

using Capacity = int64_t;
constexpr Capacity kInfinite = std::numeric_limits<Capacity>::max() / 4;

using FlowTraits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using FlowGraph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS,
    boost::property<boost::vertex_index_t, long,
                    boost::property<boost::vertex_color_t, boost::default_color_type,
                                    boost::property<boost::vertex_distance_t, long,
                                                    boost::property<boost::vertex_predecessor_t,
                                                                    FlowTraits::edge_descriptor>>>>,
    boost::property<boost::edge_capacity_t, Capacity,
                    boost::property<boost::edge_residual_capacity_t, Capacity,
                                    boost::property<boost::edge_reverse_t, FlowTraits::edge_descriptor>>>>;

// Source, sink, and for each joint value v an edge v_in -> v_out whose capacity is v's weight: cutting it
// means saving v.
class FlowNetwork {
 public:
  explicit FlowNetwork(int num_values) : g_(size_t(2 + 2 * num_values)) {}
  static long source() { return 0; }
  static long sink() { return 1; }
  static long in(ValueId v) { return 2 + 2 * long(v); }
  static long out(ValueId v) { return 3 + 2 * long(v); }

  void add_edge(long from, long to, Capacity capacity) {
    auto forward = boost::add_edge(size_t(from), size_t(to), g_).first;
    auto backward = boost::add_edge(size_t(to), size_t(from), g_).first;
    boost::put(boost::edge_capacity, g_, forward, capacity);
    boost::put(boost::edge_capacity, g_, backward, 0);
    boost::put(boost::edge_reverse, g_, forward, backward);
    boost::put(boost::edge_reverse, g_, backward, forward);
  }

  // Runs max-flow and returns the minimal source side of a minimum cut: the vertices reachable from the source
  // in the residual network (the same set for every maximum flow, so the answer does not depend on the
  // algorithm's tie-breaking).
  std::vector<char> min_cut_source_side() {
    const Capacity flow = boost::boykov_kolmogorov_max_flow(g_, size_t(source()), size_t(sink()));
    KILN_ASSERT(flow < kInfinite, "min-cut partitioner: no finite cut separates the backward from the primals");
    std::vector<char> reached(boost::num_vertices(g_), 0);
    std::vector<size_t> work{size_t(source())};
    reached[size_t(source())] = 1;
    auto residual = boost::get(boost::edge_residual_capacity, g_);
    while (!work.empty()) {
      size_t u = work.back();
      work.pop_back();
      for (auto [e, end] = boost::out_edges(u, g_); e != end; ++e) {
        size_t v = boost::target(*e, g_);
        if (residual[*e] > 0 && !reached[v]) {
          reached[v] = 1;
          work.push_back(v);
        }
      }
    }
    return reached;
  }

 private:
  FlowGraph g_;
};

// ---------------------------------------------------------------- node facts (functorch's heuristics)

// The distance of a forward value no backward use is reachable from.
constexpr int kNoBackwardUse = 1000000000;

class MinCutModel {
 public:
  MinCutModel(const Graph& joint, const JointRegions& regions, const MinCutOptions& opts)
      : joint_(joint), regions_(regions), opts_(opts), users_(joint.users()),
        is_output_(size_t(joint.num_values()), 0), dist_(size_t(joint.num_values()), 0) {
    for (ValueId id : joint.outputs()) is_output_[size_t(id)] = 1;
    compute_distances();
  }

  RecomputeClass class_of(ValueId v) const {
    int producer = joint_.value(v).producer;
    return producer < 0 ? RecomputeClass::View : recompute_class(joint_.nodes()[size_t(producer)]);
  }

  // Materialised: a graph input, a graph output, or read by a node it cannot fuse into.
  bool materialized(ValueId v) const {
    if (regions_.of_value[size_t(v)] == JointRegion::Primal || is_output_[size_t(v)]) return true;
    RecomputeClass c = class_of(v);
    for (int user : users_[size_t(v)])
      if (!fusible(c, joint_.nodes()[size_t(user)])) return true;
    return false;
  }

  // Materialised in the backward: some user outside the forward (looking through views) cannot fuse it, so
  // recomputing it there would not be free.
  bool materialized_in_backward(ValueId v) const {
    if (class_of(v) == RecomputeClass::View) return false;
    std::vector<ValueId> work{v};
    while (!work.empty()) {
      ValueId cur = work.back();
      work.pop_back();
      if (is_output_[size_t(cur)]) return true;  // the graph's outputs are a user no forward node fuses with
      for (int user : users_[size_t(cur)]) {
        const Node& u = joint_.nodes()[size_t(user)];
        if (regions_.of_value[size_t(u.outputs[0])] != JointRegion::Forward && !fusible(class_of(cur), u)) return true;
        if (recompute_class(u) == RecomputeClass::View) work.insert(work.end(), u.outputs.begin(), u.outputs.end());
      }
    }
    return false;
  }

  // Why a forward value must not be recomputed (nullopt: it may be).
  std::optional<std::string> ban_reason(ValueId v) const {
    if (regions_.of_value[size_t(v)] == JointRegion::Primal) return "a primal (graph input)";
    if (regions_.of_value[size_t(v)] != JointRegion::Forward) return std::nullopt;
    RecomputeClass c = class_of(v);
    if (c == RecomputeClass::View) return std::nullopt;  // views are free: never banned
    if (!recomputable(c)) return fmt::format("{} op: never recomputed", recompute_class_name(c));
    if (opts_.ban_materialized_in_backward && materialized_in_backward(v))
      return std::string("materialized in the backward: a backward user or the graph's outputs cannot fuse it");
    if (dist_[size_t(v)] > opts_.max_dist_from_bw && dist_[size_t(v)] < kNoBackwardUse)
      return fmt::format("distance rule: {} forward steps from its nearest backward use (more than {})",
                         dist_[size_t(v)], opts_.max_dist_from_bw);
    // A pointwise op's output is smaller than its inputs only by a narrower dtype (a comparison to bool, a cast):
    // as cheap to recompute as any pointwise op, so the rule (meant for reductions) skips it. PyTorch's dropout
    // compares f32 draws (exactly 4x, not banned); bernoulli's f64 draws would be 8x.
    if (opts_.ban_small_outputs && c != RecomputeClass::Pointwise) {
      int64_t in_bytes = 0, out_bytes = value_bytes(joint_, v);
      for (ValueId in : Graph::node_inputs(joint_.nodes()[size_t(joint_.value(v).producer)]))
        in_bytes += value_bytes(joint_, in);
      if (out_bytes * 4 < in_bytes)
        return fmt::format("4x rule: its output ({} bytes) is over 4x smaller than its inputs ({} bytes)", out_bytes,
                           in_bytes);
    }
    return std::nullopt;
  }

  // The cost of saving v: its bytes, times 1.1 per step from the backward (1 to 100 steps), doubled when
  // fusion would otherwise never write it to memory.
  Capacity weight(ValueId v) const {
    double scaled = double(value_bytes(joint_, v)) * std::pow(1.1, std::max(std::min(dist_[size_t(v)], 100), 1));
    Capacity w = Capacity(scaled);
    return materialized(v) ? w : 2 * w;
  }

  const std::vector<std::vector<int>>& users() const { return users_; }

 private:
  // Steps from each forward-side value to its nearest use outside the forward (0 for values outside it).
  void compute_distances() {
    const int far = kNoBackwardUse;
    const auto& nodes = joint_.nodes();
    auto dist_through_users = [&](ValueId v) {
      int d = far;
      for (int user : users_[size_t(v)])
        for (ValueId o : nodes[size_t(user)].outputs) d = std::min(d, dist_[size_t(o)] == far ? far : dist_[size_t(o)] + 1);
      return d;
    };
    auto in_forward = [&](ValueId v) {
      JointRegion r = regions_.of_value[size_t(v)];
      return r == JointRegion::Forward || r == JointRegion::Primal;
    };
    for (size_t k = nodes.size(); k-- > 0;)
      for (ValueId o : nodes[k].outputs) dist_[size_t(o)] = in_forward(o) ? dist_through_users(o) : 0;
    for (ValueId in : joint_.inputs()) dist_[size_t(in)] = in_forward(in) ? dist_through_users(in) : 0;
  }

  const Graph& joint_;
  const JointRegions& regions_;
  const MinCutOptions& opts_;
  std::vector<std::vector<int>> users_;
  std::vector<char> is_output_;
  std::vector<int> dist_;
};

// The flow network of functorch's partitioner over the joint graph.
FlowNetwork build_network(const Graph& joint, const JointLayout& layout, const JointRegions& regions,
                          const MinCutModel& model) {
  FlowNetwork net(joint.num_values());
  for (ValueId v = 0; v < joint.num_values(); ++v) {
    JointRegion r = regions.of_value[size_t(v)];
    if (joint.value(v).producer < -1 || r == JointRegion::Constant) continue;  // erased values; constants are free
    if (r == JointRegion::Tangent || r == JointRegion::Backward) {
      net.add_edge(FlowNetwork::in(v), FlowNetwork::sink(), kInfinite);
      continue;
    }
    if (model.ban_reason(v)) net.add_edge(FlowNetwork::source(), FlowNetwork::in(v), kInfinite);
    net.add_edge(FlowNetwork::in(v), FlowNetwork::out(v), model.weight(v));
    for (int user : model.users()[size_t(v)])
      for (ValueId o : joint.nodes()[size_t(user)].outputs)
        net.add_edge(FlowNetwork::out(v), FlowNetwork::in(o), kInfinite);
  }
  // A gradient that is itself a forward-side value must reach the backward, saved or recomputed.
  for (size_t i = size_t(layout.num_forward_outputs); i < joint.outputs().size(); ++i)
    if (regions.forward_side(joint.outputs()[i]))
      net.add_edge(FlowNetwork::out(joint.outputs()[i]), FlowNetwork::sink(), kInfinite);
  return net;
}

}  // namespace

Partition partition_min_cut(const Graph& joint, const JointLayout& layout, const MinCutOptions& options) {
  JointRegions regions = classify_joint(joint, layout);
  MinCutModel model(joint, regions, options);
  std::vector<char> source_side = build_network(joint, layout, regions, model).min_cut_source_side();
  std::vector<ValueId> saved;
  for (ValueId v = 0; v < joint.num_values(); ++v)
    if (source_side[size_t(FlowNetwork::in(v))] && !source_side[size_t(FlowNetwork::out(v))] &&
        regions.forward_side(v))
      saved.push_back(v);

  // The weights are biased (distance, fusion), so in rare graphs the cut could hold more bytes than the
  // default partition saves; then the default's saved set is used (min-cut never saves more). Both sides
  // count only what the backward reads: build_partition drops the rest (the default marks the inputs of
  // values nothing reads).
  std::vector<ValueId> default_saved = save_needed_values(joint, layout, regions);
  const int64_t cut_bytes = bytes_the_backward_reads(joint, layout, saved);
  const int64_t default_bytes = bytes_the_backward_reads(joint, layout, default_saved);
  std::optional<std::string> fallback;
  if (cut_bytes > default_bytes) {
    fallback = fmt::format("the min cut would save {} bytes, more than the default partition's {}: the default's "
                           "saved values are used",
                           cut_bytes, default_bytes);
    saved = default_saved;
  }

  auto saved_reason = [&](ValueId v) {
    if (fallback) return *fallback;
    std::string why = fmt::format("on the min cut ({} bytes, weight {})", value_bytes(joint, v), model.weight(v));
    if (auto ban = model.ban_reason(v)) why += "; " + *ban;
    return why;
  };
  auto recompute_reason = [&](ValueId v) {
    RecomputeClass c = model.class_of(v);
    if (regions.of_value[size_t(v)] != JointRegion::Forward)
      return fmt::format("{}: only the backward reads it, computed there", recompute_class_name(c));
    return fmt::format("{}: recomputed in the backward from the saved values (saving it would weigh {})",
                       recompute_class_name(c), model.weight(v));
  };
  return build_partition(joint, layout, regions, std::move(saved), saved_reason, recompute_reason, "min-cut",
                         options.wrong_recompute);
}

}  // namespace kiln::aot
