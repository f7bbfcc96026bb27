// probe_lowering: builds a one-node graph for an op from its schema (defaults where the schema has them,
// otherwise the first of a few plain candidate values that shape inference accepts) and asks
// decompose_composites and lower_graph what they make of it.
#include "inductor/lowering_probe.h"

#include "inductor/decompose.h"
#include "inductor/lowering.h"

namespace kiln::inductor {

namespace {

// One candidate call shape: the dtype and sizes of the tensor arguments, the value of every int list, the
// ints in order (the last one repeats), and whether optional arguments get values instead of their defaults.
struct Variant {
  DType dtype;
  Shape sizes;
  IntList ints;
  std::vector<int64_t> int_args;
  bool fill_optionals;
};

std::vector<Variant> variants() {
  std::vector<Variant> out;
  for (bool fill : {false, true})
    for (const std::vector<int64_t>& int_args : {std::vector<int64_t>{1}, std::vector<int64_t>{0, 3}})
      for (DType dt : {DType::F32, DType::I64, DType::Bool})
        for (const Shape& s : {Shape{3, 3}, Shape{2, 3, 3}, Shape{1, 3, 4, 4}, Shape{6}})
          for (const IntList& l : {IntList{3, 3}, IntList{1, 0}, IntList{1}, IntList{9}, IntList{2, 2}})
            out.push_back({dt, s, l, int_args, fill});
  return out;
}

graph::Arg default_arg(const IValue& v) {
  if (v.is_none()) return std::monostate{};
  if (v.is_scalar()) return v.scalar();
  if (v.is_int_list()) return v.int_list();
  if (v.is_dtype()) return v.dtype();
  if (v.is_string()) return v.string();
  return std::monostate{};
}

// A one-node graph calling `op` in the shape of `v`; throws kiln::Error when the op refuses that call.
graph::Graph probe_graph(const OpInfo& op, const Variant& v) {
  graph::Graph g;
  g.name = "probe";
  int inputs = 0;
  auto tensor = [&](DType dt, const Shape& sizes) {
    return g.add_input(fmt::format("in{}", inputs++), TensorMeta{dt, sizes, contiguous_strides(sizes), Device{}});
  };
  std::vector<graph::Arg> args;
  size_t ints_used = 0;
  for (const ArgSpec& a : op.schema.args) {
    // Index-like tensors are int64 along the first dim (index_select, gather, nll_loss's target).
    const bool index_like = a.name == "index" || a.name == "indices" || a.name == "target";
    const bool use_default = a.default_value && !(v.fill_optionals && a.optional);
    if (use_default) {
      args.push_back(default_arg(*a.default_value));
      continue;
    }
    if (a.optional && !v.fill_optionals) {  // `Tensor? bias` without a default (convolution's): None
      args.push_back(std::monostate{});
      continue;
    }
    switch (a.type) {
      case ArgType::Tensor:
        if (a.name == "seed" || a.name == "offset") args.push_back(graph::TensorArg{tensor(DType::I64, {})});  // philox_rand
        else if (index_like) args.push_back(graph::TensorArg{tensor(DType::I64, {v.sizes[0]})});
        else if (a.optional) args.push_back(graph::TensorArg{tensor(v.dtype, {v.sizes.size() > 1 ? v.sizes[1] : v.sizes[0]})});
        else args.push_back(graph::TensorArg{tensor(v.dtype, v.sizes)});
        break;
      case ArgType::TensorList: args.push_back(graph::TensorListArg{{tensor(v.dtype, v.sizes), tensor(v.dtype, v.sizes)}}); break;
      case ArgType::OptTensorList: args.push_back(graph::TensorListArg{{tensor(DType::I64, {2})}}); break;
      case ArgType::Scalar: args.push_back(Scalar(2.0)); break;
      case ArgType::Int: args.push_back(Scalar(v.int_args[std::min(ints_used++, v.int_args.size() - 1)])); break;
      case ArgType::Float: args.push_back(Scalar(0.5)); break;
      case ArgType::Bool: args.push_back(Scalar(false)); break;
      case ArgType::IntList: args.push_back(v.ints); break;
      case ArgType::DType: args.push_back(DType::F32); break;
      case ArgType::Str: args.push_back(std::string("none")); break;
    }
  }
  std::vector<graph::ValueId> outs = g.add_op(op.id, std::move(args));
  g.set_outputs(outs);
  return g;
}

}  // namespace

std::string OpLowering::str() const {
  switch (kind) {
    case Kind::Lowered: return "lowered";
    case Kind::Decomposed: return "decomposed";
    case Kind::Extern: return "extern: " + reason;
    case Kind::Unknown: break;
  }
  return "?: " + reason;
}

ProbeGraph one_node_graph(const OpInfo& op) {
  std::string last_error = "no candidate call";
  for (const Variant& v : variants()) {
    graph::Graph g;
    try {
      g = probe_graph(op, v);
    } catch (const Error& e) {
      last_error = e.what();
      continue;
    }
    return {Decision::yes(), std::move(g)};
  }
  return {Decision::no(last_error), {}};
}

OpLowering probe_lowering(const OpInfo& op) {
  const ProbeGraph probe = one_node_graph(op);
  if (!probe.decision)
    return {OpLowering::Kind::Unknown, "no probe call passes shape inference (" + probe.decision.reason() + ")"};
  try {
    const CompileContext none;  // no injection, the default target
    graph::Graph decomposed = decompose_composites(probe.graph, none);
    bool kept = false;  // the op's node survived decomposition
    for (const graph::Node& n : decomposed.nodes()) kept |= n.kind == graph::NodeKind::Op && n.op == op.id;
    if (!kept) return {OpLowering::Kind::Decomposed, ""};
    LoweredGraph lg = lower_graph(decomposed, graph::StorageModel(decomposed), none);
    for (const LoopNode& n : lg.nodes)
      if (n.kind == LoopNode::Kind::Extern && decomposed.nodes()[size_t(n.graph_node)].op == op.id)
        return {OpLowering::Kind::Extern, n.reason};
    return {OpLowering::Kind::Lowered, ""};
  } catch (const std::exception& e) {
    return {OpLowering::Kind::Unknown, fmt::format("the probe call failed to lower: {}", e.what())};
  }
}

}  // namespace kiln::inductor
