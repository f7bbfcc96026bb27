// kiln::explain's result and its printed form (see explain.h).
#include "capture/explain.h"

#include <ostream>

#include "graph/text.h"

namespace kiln {

namespace capture {

ExplainOutput explain_trace(const Trace& trace, const GuardSet& guards) {
  ExplainOutput e;
  for (const Step& s : trace.steps) {
    if (s.kind == Step::Kind::Graph) {
      const Segment& seg = trace.segments[size_t(s.index)];
      e.ops_per_graph.push_back(seg.graph.num_op_nodes());
      e.op_count += seg.graph.num_op_nodes();
      e.graphs.push_back(graph::print_graph(seg.graph));
    } else if (s.kind == Step::Kind::Eager) {
      const EagerRegion& r = trace.eager[size_t(s.index)];
      e.breaks.push_back({std::string(break_kind_name(r.kind)), r.reason, r.site});
    } else {
      const BranchPoint& b = trace.branches[size_t(s.index)];
      e.breaks.push_back({std::string(break_kind_name(b.kind)), b.reason, b.site});
    }
  }
  e.graph_count = int(e.ops_per_graph.size());
  e.graph_break_count = int(e.breaks.size());
  e.guards = guards.describe();
  return e;
}

}  // namespace capture

std::ostream& operator<<(std::ostream& os, const ExplainOutput& e) {
  os << fmt::format("Graph Count: {}\nGraph Break Count: {}\nOp Count: {}\n", e.graph_count, e.graph_break_count,
                    e.op_count);
  os << "Break Reasons:\n";
  for (size_t i = 0; i < e.breaks.size(); ++i)
    os << fmt::format("  Break Reason {}:\n    Reason: {} ({})\n    User Stack: {}\n", i + 1, e.breaks[i].reason,
                      e.breaks[i].kind, e.breaks[i].site.str());
  os << "Ops per Graph:\n";
  for (size_t i = 0; i < e.ops_per_graph.size(); ++i)
    os << fmt::format("  Graph {}: {} ops\n", i + 1, e.ops_per_graph[i]);
  os << "Guards:\n";
  for (const std::string& g : e.guards) os << "  " << g << "\n";
  return os;
}

}  // namespace kiln
