// Shared element loops (backends/cpu/codegen_groups.h), the CPU code generator's answer to backward kernels of
// many short loops: which loops share one element loop, and that sharing never changes a result (a loop reading
// another element of what the group wrote stays out, values forwarded from registers are rounded as stored,
// chain100's backward still matches the interpreter).
#include <gtest/gtest.h>

#include <cmath>

#include "aot/compiled.h"
#include "api/backends.h"
#include "api/pipeline.h"
#include "backends/cpu/codegen_groups.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/passes.h"
#include "graph/storage_model.h"
#include "graph/text.h"
#include "backends/cpu/backend.h"
#include "inductor/code_generator.h"
#include "inductor/compile.h"
#include "inductor/decompose.h"
#include "inductor/lowering.h"
#include "inductor/schedule_passes.h"
#include "ops/api.h"

namespace kiln {
namespace {

using inductor::cpu_codegen::ElementGroup;

// Three loops in one kernel (the exp and the product are realised: each has two readers), each reading the
// others at the element it computes, three libm calls in all.
const char* const kSameElement = R"(graph same(%x: f32[8, 64]) {
  %a = exp(%x) : f32[8, 64]
  %b = sin(%a) : f32[8, 64]
  %c = mul(%a, %b) : f32[8, 64]
  %d = cos(%c) : f32[8, 64]
  %e = add(%c, %d) : f32[8, 64]
  return %e
}
)";

// The second loop reads the first loop's row backwards: element x needs element 63 - x, written later.
const char* const kOtherElement = R"(graph flipped(%x: f32[8, 64]) {
  %a = exp(%x) : f32[8, 64]
  %f = flip(%a, [1]) : f32[8, 64]
  %o = add(%f, %a) : f32[8, 64]
  return %o
}
)";

// The CPU schedule of a graph and its kernels' element groups.
struct Planned {
  inductor::LoweredGraph lowered;
  inductor::Schedule schedule;
  std::vector<std::vector<ElementGroup>> groups;  // by kernel
};

Planned plan(const std::string& text) {
  inductor::CompileContext ctx;
  ctx.target = kiln::cpu::host_code_generator().target();
  std::vector<bool> unrounded;
  graph::Graph g = inductor::decompose_composites(graph::parse_graph(text, "g.kir"), ctx, &unrounded);
  graph::run_pipeline(g, graph::cleanup_pipeline(), "inductor");
  Planned p;
  p.lowered = inductor::lower_graph(g, graph::StorageModel(g), ctx, unrounded);
  p.schedule = inductor::fuse(p.lowered, ctx);
  inductor::localise(p.schedule, p.lowered, ctx);
  for (const inductor::Kernel& k : p.schedule.kernels)
    p.groups.push_back(inductor::cpu_codegen::plan_element_groups(k, p.lowered));
  return p;
}

// Compiled outputs against the interpreter's (the comparator, fp64 reference).
void expect_compiled_matches_interpreter(const graph::Graph& g, const std::vector<Tensor>& inputs) {
  ComparisonBaselines baselines = comparison_baselines(g, inputs);
  std::vector<Tensor> actual = (*compile(g))(graph::copy_inputs(inputs));
  CompareVerdict v = compare_to_baselines(baselines, actual);
  EXPECT_TRUE(v.ok) << v.str();
}

TEST(SharedElementLoops, LoopsReadingTheElementTheyComputeShareOneLoopAndLocalRowsAreNotStored) {
  Planned p = plan(kSameElement);
  ASSERT_EQ(p.schedule.kernels.size(), 1u);
  ASSERT_EQ(p.schedule.kernels[0].loops.size(), 3u);
  ASSERT_EQ(p.groups[0].size(), 1u);
  const ElementGroup& g = p.groups[0][0];
  EXPECT_EQ(g.first, 0u);
  EXPECT_EQ(g.end, 3u);
  // Both kernel-local rows are read only inside the group: forwarded, never stored.
  EXPECT_EQ(g.unstored.size(), p.schedule.kernels[0].local_buffers.size());
  EXPECT_EQ(g.unstored.size(), 2u);
  expect_compiled_matches_interpreter(graph::parse_graph(kSameElement), {mul(randn({8, 64}), 0.5)});
}

TEST(SharedElementLoops, ALoopReadingAnotherElementOfTheGroupsRowStaysOut) {
  Planned p = plan(kOtherElement);
  ASSERT_EQ(p.schedule.kernels.size(), 1u);
  ASSERT_EQ(p.schedule.kernels[0].loops.size(), 2u);  // the case this test is about: both loops in one kernel
  EXPECT_TRUE(p.groups[0].empty());
  expect_compiled_matches_interpreter(graph::parse_graph(kOtherElement), {randn({8, 64})});
}

// An f16 value read by a group's later loops from registers is the f16 value eager has (rounded), as a load of
// the stored row would give: exp(x) in [756, 1012] is a multiple of 0.5 once rounded to f16, so exp(x) - 500 is
// too, while an unrounded difference would land on odd quarters as often as not (f16 spacing is 0.25 in
// [256, 512]).
TEST(SharedElementLoops, ForwardedValuesAreRoundedToTheBufferDtype) {
  const char* const kRounded = R"(graph rounded(%x: f16[8, 64]) {
  %a = exp(%x) : f16[8, 64]
  %s = sin(%a) : f16[8, 64]
  %c = sub(%a, 500.0) : f16[8, 64]
  return %c, %s
}
)";
  Planned p = plan(kRounded);
  ASSERT_EQ(p.groups.size(), 1u);
  ASSERT_EQ(p.groups[0].size(), 1u);  // the exp's loop and both readers share one element loop
  ASSERT_EQ(p.groups[0][0].end - p.groups[0][0].first, 3u);
  Tensor x = to(add(mul(rand({8, 64}), std::log(1012.0) - std::log(756.0)), std::log(756.0)), DType::F16);
  std::vector<Tensor> out = (*compile(graph::parse_graph(kRounded)))({x});
  Tensor c = contiguous(to(out[0], DType::F64));
  int odd_quarters = 0;
  for (int64_t i = 0; i < c.numel(); ++i) odd_quarters += std::fmod(static_cast<const double*>(c.data_ptr())[i], 0.5) != 0.0;
  EXPECT_EQ(odd_quarters, 0);
  expect_compiled_matches_interpreter(graph::parse_graph(kRounded), {x});
}

// chain100's backward (the min-cut partition recomputes the chain: 40 loops in one kernel) in groups of a few
// libm calls each, and its gradient still matches the interpreter.
TEST(SharedElementLoops, Chain100BackwardIsGroupedAndMatchesTheInterpreter) {
  graph::Graph g = graph::load_graph(KILN_SOURCE_DIR "/examples/chain100.kir");
  std::vector<bool> mask(g.inputs().size(), true);
  aot::AotConfig config = aot_backend_config("inductor", {.repro_stage = "test"});
  config.policy = aot::PartitionPolicy::MinCut;
  const graph::Graph backward = aot::aot_graphs(g, mask, config).partition.backward;
  Planned p = plan(graph::print_graph(backward));
  ASSERT_EQ(p.schedule.kernels.size(), 1u);
  const size_t loops = p.schedule.kernels[0].loops.size();
  size_t grouped = 0;
  for (const ElementGroup& group : p.groups[0]) grouped += group.end - group.first;
  EXPECT_GE(loops, 30u);
  EXPECT_GT(grouped, loops / 2) << p.groups[0].size() << " groups";
  std::vector<Tensor> inputs;
  for (graph::ValueId id : backward.inputs()) inputs.push_back(mul(randn(backward.value(id).meta.sizes), 0.5));
  expect_compiled_matches_interpreter(backward, inputs);
}

}  // namespace
}  // namespace kiln
