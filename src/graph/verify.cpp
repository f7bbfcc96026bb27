// The graph verifier (verify.h): structural invariants (SSA, defined before use, unique names, producers) and
// every node's output metas re-inferred from the op table. It runs once per node of every graph a tool loads, so
// messages are only built when a check fails.
#include "graph/verify.h"

#include <string_view>
#include <unordered_set>

#include "graph/printer.h"

namespace kiln::graph {
namespace {

using kir::name_ref;
using kir::type_str;
using kir::value_ref;

std::string where(const std::string& file, const SourceLoc& loc) {
  return loc.known() ? fmt::format("{}:{}:{}", file, loc.line, loc.col) : file;
}

std::string node_summary(const Graph& g, const Node& n, int index) {
  std::string text = n.kind == NodeKind::Constant
                         ? fmt::format("{} = constant", kir::results_str(g, n))
                         : fmt::format("{} = {}", kir::results_str(g, n), kir::call_str(g, n));
  if (text.size() > 120) text = text.substr(0, 117) + "...";
  return fmt::format("node {} ({})", index, text);
}

}  // namespace

void verify_graph(const Graph& g, const std::string& filename) {
  // Messages are built only when a check fails: this runs once per node of every graph a tool loads.
  const int nv = g.num_values();
  std::vector<char> defined(size_t(nv), 0);
  // Names are unique when the graph's name map finds every value under its own name (a map holds one id per
  // name); only if one is not found (a value renamed in place) is a set of all names built.
  bool names_indexed = true;
  for (ValueId id = 0; id < nv && names_indexed; ++id) names_indexed = g.find_value(g.value(id).name) == id;
  std::unordered_set<std::string_view> names;  // views of the graph's value names, when needed
  if (!names_indexed) names.reserve(size_t(nv));
  auto define = [&](ValueId id, const auto& context, const SourceLoc& loc) {
    KILN_CHECK(id >= 0 && id < nv, "{}: {} defines value #{}, which does not exist; the graph is corrupt",
               where(filename, loc), context(), id);
    KILN_CHECK(!defined[size_t(id)], "{}: {} defines {} a second time; every value is defined once (SSA)",
               where(filename, loc), context(), value_ref(g, id));
    const ValueInfo& v = g.value(id);
    KILN_CHECK(names_indexed || names.insert(v.name).second, "{}: {} reuses the name {}; value names must be unique",
               where(filename, loc), context(), name_ref(v.name));
    defined[size_t(id)] = 1;
  };
  for (ValueId id : g.inputs()) {
    SourceLoc loc = id >= 0 && id < nv ? g.value(id).loc : SourceLoc{};
    define(id, [&] { return fmt::format("graph input {}", value_ref(g, id)); }, loc);
    KILN_CHECK(g.value(id).producer == -1, "{}: graph input {} is also recorded as produced by node {}",
               where(filename, loc), value_ref(g, id), g.value(id).producer);
  }
  MetaBinder binder(g);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    auto what = [&] { return node_summary(g, n, int(i)); };
    auto at = [&] { return where(filename, n.loc); };
    if (n.kind == NodeKind::Constant) {
      KILN_CHECK(n.outputs.size() == 1 && n.constant.defined(), "{}: {}: a constant node holds one defined tensor",
                 at(), what());
    } else {
      KILN_CHECK(n.args.size() == n.info().schema.args.size(), "{}: {}: {} arguments, but the schema {} has {}", at(),
                 what(), n.args.size(), n.info().schema.str(), n.info().schema.args.size());
      auto check_read = [&](ValueId id) {
        KILN_CHECK(id >= 0 && id < nv && defined[size_t(id)],
                   "{}: {}: reads {} before it is defined; nodes must come after the values they use", at(), what(),
                   value_ref(g, id));
      };
      for (const Arg& a : n.args) {
        if (const auto* t = std::get_if<TensorArg>(&a)) check_read(t->id);
        else if (const auto* l = std::get_if<TensorListArg>(&a))
          for (ValueId id : l->ids)
            if (id != kNoValue) check_read(id);
      }
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      ValueId id = n.outputs[k];
      define(id, what, n.loc);
      KILN_CHECK(g.value(id).producer == int(i) && g.value(id).output_index == int(k),
                 "{}: {}: result {} records producer {} output {}, not node {} output {}; the graph is corrupt", at(),
                 what(), value_ref(g, id), g.value(id).producer, g.value(id).output_index, i, k);
    }
    if (n.kind == NodeKind::Constant) {
      const TensorMeta& recorded = g.value(n.outputs[0]).meta;
      const Tensor& c = n.constant;
      bool same = recorded.dtype == c.dtype() && recorded.sizes == c.sizes() && recorded.strides == c.strides() &&
                  recorded.device == c.device();
      KILN_CHECK(same, "{}: {}: the constant is {} but the graph says {}", at(), what(), type_str(c.meta()),
                 type_str(recorded));
      continue;
    }
    std::vector<TensorMeta> inferred;
    try {
      inferred = binder.infer(n);
    } catch (const Error& e) {
      fail("{}: {}: {}", at(), what(), e.what());
    }
    KILN_CHECK(inferred.size() == n.outputs.size(), "{}: {}: the op produces {} results but the graph records {}",
               at(), what(), inferred.size(), n.outputs.size());
    for (size_t k = 0; k < inferred.size(); ++k) {
      const TensorMeta& recorded = g.value(n.outputs[k]).meta;
      KILN_CHECK(recorded == inferred[k],
                 "{}: {}: expected {} but the graph says {} for {}; the recorded meta is stale (re-run shape "
                 "inference) or the arguments are wrong",
                 at(), what(), type_str(inferred[k]), type_str(recorded), value_ref(g, n.outputs[k]));
    }
  }
  for (ValueId id : g.outputs())
    KILN_CHECK(id >= 0 && id < nv && defined[size_t(id)],
               "{}: graph output {} is not defined by an input or a node; return only defined values", filename,
               value_ref(g, id));
}

}  // namespace kiln::graph
