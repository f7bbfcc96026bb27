// kiln::explain's result: what capturing a function produced for one call, like torch._dynamo.explain():
// graph count, graph breaks (kind, reason, the user's line), ops per graph, the guards, each graph as .kir.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "capture/guards.h"
#include "capture/site.h"
#include "capture/trace.h"

namespace kiln {

struct ExplainOutput {
  struct Break {
    std::string kind;  // item, bool, elements, disable, print, unsupported_op, autograd
    std::string reason;
    capture::SourceSite site;
  };
  int graph_count = 0;
  int graph_break_count = 0;
  int op_count = 0;
  std::vector<Break> breaks;
  std::vector<int> ops_per_graph;
  std::vector<std::string> guards;
  std::vector<std::string> graphs;  // .kir text
};
std::ostream& operator<<(std::ostream& os, const ExplainOutput& e);

namespace capture {
ExplainOutput explain_trace(const Trace& trace, const GuardSet& guards);
}  // namespace capture

}  // namespace kiln
