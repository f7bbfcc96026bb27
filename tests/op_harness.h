// The per-op comparison harness of the compiled backends' tests, parameterised by backend: test_inductor.cpp
// (the CPU) and test_cuda.cpp (the GPU) run it with their compile options and dtypes. Every op with samples
// (op_samples.h) becomes random one-node graphs, compiled and judged against the interpreter through the
// comparator with the fp64 reference; compiled_vs_interpreter judges any graph the same way.
#pragma once
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <map>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "eager/philox.h"
#include "graph/compare.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "inductor/compile.h"
#include "op_samples.h"
#include "ops/api.h"
#include "ops/dispatch.h"

namespace kiln {

// Copies of `ts` that share no storage with them (undefined entries stay undefined), without autograd history.
inline std::vector<Tensor> clones(const std::vector<Tensor>& ts) {
  NoGradGuard no_grad;
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.defined() ? clone(t).detach() : t);
  return out;
}

// Runs `g` compiled with `opts` and with the interpreter on copies of the same inputs (random ops from seed 7 in
// each run); the comparator's verdict against eager with the fp64 reference.
inline CompareVerdict compiled_vs_interpreter(const graph::Graph& g, const std::vector<Tensor>& inputs,
                                              const CompileOptions& opts = {}) {
  manual_seed(7);
  std::vector<Tensor> expected = graph::run_graph(g, clones(inputs));
  graph::InterpretOptions fp64;
  fp64.fp64 = true;
  manual_seed(7);
  std::vector<Tensor> reference = graph::run_graph(g, clones(inputs), fp64);
  std::shared_ptr<CompiledGraph> c = compile(g, opts);
  manual_seed(7);
  std::vector<Tensor> actual = (*c)(clones(inputs));
  return compare_outputs(expected, actual, reference);
}

// One op of a parameterised per-op test, named by the op.
struct OpRow {
  std::string name;
};
inline void PrintTo(const OpRow& r, std::ostream* os) { *os << r.name; }
inline std::string op_row_name(const ::testing::TestParamInfo<OpRow>& i) { return i.param.name; }

// The samples of every op that has them (differentiable or not), by name.
inline const std::map<std::string, rc::Gen<OpSample>>& op_sample_gens() {
  static const auto s = [] {
    auto all = differentiable_op_samples();
    for (auto& [name, gen] : non_differentiable_op_samples()) all.emplace(name, gen);
    return all;
  }();
  return s;
}
inline std::vector<OpRow> sampled_op_rows() {
  std::vector<OpRow> rows;
  for (const auto& [name, gen] : op_sample_gens()) rows.push_back({name});
  return rows;
}

// What a per-op test compiles for: the name its properties are reported under ("InductorOp": properties
// "InductorOp/add/f32"), the compile options, the dtypes each op is checked in and the cases per dtype.
struct OpHarnessBackend {
  std::string label;
  CompileOptions options;
  std::vector<DType> dtypes;
  int cases = 4;
};

// Op `name` on `backend`: in each dtype, random samples as one-node graphs, compiled == interpreter. A sample
// the op refuses in a floating dtype is discarded. Most float ops refuse integer tensors outright: a refused
// sample in an integer dtype passes vacuously (discarding it would make RapidCheck give up on those ops), and
// the integer samples an op accepts are checked.
inline void check_op_compiled_equals_interpreter(const std::string& name, const OpHarnessBackend& backend) {
  const OpInfo* op = find_op(name);
  ASSERT_NE(op, nullptr);
  const rc::Gen<OpSample>& gen = op_sample_gens().at(name);
  for (DType dt : backend.dtypes) {
    check_property(fmt::format("{}/{}/{}", backend.label, name, dtype_name(dt)), [&] {
      OpSample sample = *gen;
      RC_PRE(!sample.shape_depends_on_data);
      graph::Graph g;
      std::vector<Tensor> inputs;
      try {
        std::tie(g, inputs) = one_node_graph(*op, sample, dt);
        manual_seed(7);
        graph::run_graph(g, clones(inputs));
      } catch (const Error&) {
        if (!is_floating(dt)) RC_SUCCEED("the op does not accept this sample in an integer dtype");
        RC_DISCARD("the op does not accept this sample in this dtype");
      }
      CompareVerdict v = compiled_vs_interpreter(g, inputs, backend.options);
      if (!v.ok) RC_FAIL(v.str() + "\n" + graph::print_graph(g));
    }, backend.cases);
  }
}

}  // namespace kiln
