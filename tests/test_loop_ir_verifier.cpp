// The loop-IR verifier (src/inductor/verify_schedule.h): every schedule the passes make is accepted, and each
// invariant, broken on purpose in a real schedule, is named by the verifier. This file also turns the verifier
// on for every compile in the test binary (as KILN_VERIFY does in builds without NDEBUG).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>

#include "core/error.h"
#include "graph/passes.h"
#include "graph/storage_model.h"
#include "graph/text.h"
#include "backends/cpu/backend.h"
#include "inductor/code_generator.h"
#include "inductor/compile.h"
#include "inductor/decompose.h"
#include "inductor/lowering.h"
#include "inductor/verify_schedule.h"

namespace kiln::inductor {
namespace {

namespace fs = std::filesystem;

// Every compile in this binary verifies its schedules between passes.
const bool verifier_on_in_tests = (force_schedule_verifier(true), true);

// A graph taken through the pipeline's passes up to the finished schedule, with streaming stores for every
// output (threshold 1 byte), so every placement decision is exercised.
struct Scheduled {
  graph::Graph graph;
  LoweredGraph lowered;
  Schedule schedule;
};
std::unique_ptr<Scheduled> schedule_of(const std::string& text) {
  auto p = std::make_unique<Scheduled>();
  CompileContext ctx;
  ctx.target = kiln::cpu::host_code_generator().target();
  ctx.target.streaming_threshold_bytes = 1;
  std::vector<bool> unrounded;
  p->graph = decompose_composites(graph::parse_graph(text, "v.kir"), ctx, &unrounded);
  graph::run_pipeline(p->graph, graph::cleanup_pipeline(), "inductor");
  p->lowered = lower_graph(p->graph, graph::StorageModel(p->graph), ctx, unrounded);
  p->schedule = fuse(p->lowered, ctx);
  localise(p->schedule, p->lowered, ctx);
  for (const SchedulePass& pass : kiln::cpu::host_code_generator().placement_passes()) pass.run(p->schedule, p->lowered, ctx);
  plan_memory(p->schedule, p->lowered, ctx);
  return p;
}

// Softmax over rows of 16 floats (64 bytes): one kernel whose exp row is kernel-local and whose streamed
// division is deferred into the exp loop of the next row.
const char* kSoftmax = "graph s(%x: f32[4, 16]) {\n  %y = softmax(%x, -1) : f32[4, 16]\n  return %y\n}\n";
// An extern call (mm) and the kernel that reads its result: two steps and a freed intermediate.
const char* kTwoSteps =
    "graph t(%x: f32[4, 8], %w: f32[8, 8]) {\n  %a = mm(%x, %w) : f32[4, 8]\n  %b = relu(%a) : f32[4, 8]\n"
    "  return %b\n}\n";

// Whether some problem names `invariant` (problems read "<invariant>: ...").
bool names(const std::vector<std::string>& problems, const std::string& invariant) {
  for (const std::string& p : problems)
    if (p.rfind(invariant + ": ", 0) == 0) return true;
  return false;
}
// Whether some problem names `invariant` and says `what`.
bool names(const std::vector<std::string>& problems, const std::string& invariant, const std::string& what) {
  for (const std::string& p : problems)
    if (p.rfind(invariant + ": ", 0) == 0 && p.find(what) != std::string::npos) return true;
  return false;
}
std::string all(const std::vector<std::string>& problems) {
  std::string s;
  for (const std::string& p : problems) s += p + "\n";
  return s;
}

const Kernel& only_kernel(const Scheduled& p) {
  EXPECT_EQ(p.schedule.kernels.size(), 1u);
  return p.schedule.kernels.at(0);
}

TEST(LoopIrVerifier, TheSoftmaxScheduleUsesEveryPlacementAndIsValid) {
  auto p = schedule_of(kSoftmax);
  const Kernel& k = only_kernel(*p);
  EXPECT_FALSE(k.local_buffers.empty()) << print_schedule(p->schedule, p->lowered);
  EXPECT_GE(k.deferred_host, 0) << print_schedule(p->schedule, p->lowered);
  EXPECT_TRUE(k.loops.back().stream);
  EXPECT_TRUE(schedule_problems(p->schedule, p->lowered).empty()) << all(schedule_problems(p->schedule, p->lowered));
}

TEST(LoopIrVerifier, AcceptsTheScheduleOfEveryExample) {
  for (const auto& e : fs::directory_iterator(fs::path(KILN_SOURCE_DIR) / "examples")) {
    if (e.path().extension() != ".kir") continue;
    std::ifstream in(e.path());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto p = schedule_of(text);
    EXPECT_TRUE(schedule_problems(p->schedule, p->lowered).empty())
        << e.path() << "\n" << all(schedule_problems(p->schedule, p->lowered));
  }
}

TEST(LoopIrVerifier, NamesAStepThatRunsTwice) {
  auto p = schedule_of(kSoftmax);
  p->schedule.steps.push_back(p->schedule.steps.front());
  EXPECT_TRUE(names(schedule_problems(p->schedule, p->lowered), "steps")) << all(schedule_problems(p->schedule, p->lowered));
}

TEST(LoopIrVerifier, NamesNodesOutOfTheirLoweredOrder) {
  auto p = schedule_of(kTwoSteps);
  ASSERT_EQ(p->schedule.steps.size(), 2u);
  std::swap(p->schedule.steps[0], p->schedule.steps[1]);
  p->schedule.steps[0].free_after.swap(p->schedule.steps[1].free_after);
  const auto problems = schedule_problems(p->schedule, p->lowered);
  EXPECT_TRUE(names(problems, "steps")) << all(problems);
}

TEST(LoopIrVerifier, NamesALoopThatDoesNotCoverItsNode) {
  auto p = schedule_of(kSoftmax);
  p->schedule.kernels[0].loops.back().idx.pop_back();
  EXPECT_TRUE(names(schedule_problems(p->schedule, p->lowered), "loop-shape"));
}

// Codegen binds only the kernel's outer variables and the loop's own: a body over other variables is a bug
// the verifier reports before code generation (codegen no longer checks it while emitting an index).
TEST(LoopIrVerifier, NamesAnUnboundIndexVariable) {
  auto p = schedule_of(kSoftmax);
  KernelLoop& l = p->schedule.kernels[0].loops.back();
  const LoopNode& n = p->lowered.nodes[size_t(l.node)];
  l.value = n.body(ix_vars(n.sizes), {});  // fresh variables, bound nowhere
  const auto problems = schedule_problems(p->schedule, p->lowered);
  EXPECT_TRUE(names(problems, "bound-variables", "that are not bound in the kernel")) << all(problems);
}

TEST(LoopIrVerifier, NamesAParallelDimensionOfTheWrongExtent) {
  auto p = schedule_of(kSoftmax);
  p->schedule.kernels[0].parallel_extent += 1;
  EXPECT_TRUE(names(schedule_problems(p->schedule, p->lowered), "parallel-dim"));
}

TEST(LoopIrVerifier, NamesAKernelLocalBufferThatIsAnInput) {
  auto p = schedule_of(kSoftmax);
  int input = -1;
  for (size_t b = 0; b < p->lowered.buffers.size(); ++b)
    if (p->lowered.buffers[b].kind == Buffer::Kind::Input) input = int(b);
  ASSERT_GE(input, 0);
  p->schedule.kernels[0].local_buffers.push_back(input);
  const auto problems = schedule_problems(p->schedule, p->lowered);
  EXPECT_TRUE(names(problems, "kernel-local")) << all(problems);
}

TEST(LoopIrVerifier, NamesAStreamedReduction) {
  auto p = schedule_of(kSoftmax);
  Kernel& k = p->schedule.kernels[0];
  for (KernelLoop& l : k.loops)
    if (p->lowered.nodes[size_t(l.node)].kind == LoopNode::Kind::Reduction) l.stream = true;
  const auto problems = schedule_problems(p->schedule, p->lowered);
  EXPECT_TRUE(names(problems, "stream")) << all(problems);
}

// Hosts of a deferred last loop are pointwise: only the verifier checks this (codegen's emit_host relies on it).
TEST(LoopIrVerifier, NamesADeferralIntoAReductionLoop) {
  auto p = schedule_of(kSoftmax);
  Kernel& k = p->schedule.kernels[0];
  ASSERT_EQ(p->lowered.nodes[size_t(k.loops[0].node)].kind, LoopNode::Kind::Reduction);  // the row max
  k.deferred_host = 0;
  const auto problems = schedule_problems(p->schedule, p->lowered);
  EXPECT_TRUE(names(problems, "defer", "host loop 0 is not pointwise")) << all(problems);
}

// Two-row buffers exist only for a deferred loop, whose rows set the parity that selects the row: only the
// verifier checks this (codegen's element_ptr relies on it).
TEST(LoopIrVerifier, NamesTwoRowBuffersWithoutADeferredLoop) {
  auto p = schedule_of(kSoftmax);
  Kernel& k = p->schedule.kernels[0];
  ASSERT_FALSE(k.local_buffers.empty());
  k.deferred_host = -1;
  k.two_row_buffers = {k.local_buffers[0]};
  const auto problems = schedule_problems(p->schedule, p->lowered);
  EXPECT_TRUE(names(problems, "defer", "has two-row buffers but no deferred loop")) << all(problems);
}

TEST(LoopIrVerifier, NamesABufferUsedAfterItWasFreed) {
  auto p = schedule_of(kTwoSteps);
  ASSERT_EQ(p->schedule.steps.size(), 2u);
  ASSERT_EQ(p->schedule.steps[1].free_after.size(), 1u) << print_schedule(p->schedule, p->lowered);
  std::swap(p->schedule.steps[0].free_after, p->schedule.steps[1].free_after);  // freed before the kernel reads it
  const auto problems = schedule_problems(p->schedule, p->lowered);
  EXPECT_TRUE(names(problems, "memory-plan")) << all(problems);
}

TEST(LoopIrVerifier, NamesAFreedGraphInput) {
  auto p = schedule_of(kTwoSteps);
  for (size_t b = 0; b < p->lowered.buffers.size(); ++b)
    if (p->lowered.buffers[b].kind == Buffer::Kind::Input) p->schedule.steps.back().free_after.push_back(int(b));
  const auto problems = schedule_problems(p->schedule, p->lowered);
  EXPECT_TRUE(names(problems, "memory-plan")) << all(problems);
}

// The pipeline's report: an internal error naming the pass after which the schedule broke, and each problem.
TEST(LoopIrVerifier, ABrokenScheduleIsAnInternalErrorNamingThePass) {
  auto p = schedule_of(kSoftmax);
  p->schedule.kernels[0].parallel_extent += 1;
  try {
    verify_schedule(p->schedule, p->lowered, "localise");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(e.internal());
    EXPECT_NE(std::string(e.what()).find("inductor pass localise produced an invalid schedule"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("parallel-dim: "), std::string::npos) << e.what();
  }
}

TEST(LoopIrVerifier, IsOnInTheTestBinary) { EXPECT_TRUE(verifier_on_in_tests && schedule_verifier_enabled()); }

}  // namespace
}  // namespace kiln::inductor
