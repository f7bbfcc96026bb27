// max-autotune on the CUDA backend (docs/cuda.md, backends/cuda/autotune.h). Without a GPU: the candidates of flat,
// rows and persistent-rows kernels and that each one's CUDA C compiles, the choice rule, the disk cache of choices
// read by a "second process", the mode compiling without a GPU. With a GPU (CudaGpuAutotune, skipped elsewhere with
// the reason): programs tuned at their first call equal the fp64 interpreter, a second compile takes the choices from
// memory and, after the memory is dropped, from disk without timing again, and `KILN_LOGS=autotune kiln run`
// prints candidates, times and the choice.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "cuda_testing.h"
#include "backends/cuda/autotune.h"
#include "backends/cuda/backend.h"
#include "backends/cuda/driver.h"
#include "backends/cuda/nvrtc.h"
#include "cli_run.h"
#include "core/error.h"
#include "core/options.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "inductor/compile.h"
#include "inductor/program.h"

namespace kiln {
namespace {

CompileOptions autotune_options(const std::string& mode = "max-autotune") { return cuda_compile_options(mode); }

graph::Graph parse(const std::string& text) { return graph::parse_graph(text, "autotune.kir"); }

const char* kPointwise = "graph p(%x: f32[1000, 333]) {\n  %a = mul(%x, 3.0) : f32[1000, 333]\n"
                         "  %b = sin(%a) : f32[1000, 333]\n  return %b\n}\n";
const char* kSoftmax = "graph s(%x: f32[64, 4096]) {\n  %s = softmax(%x, 1) : f32[64, 4096]\n  return %s\n}\n";
const char* kLongRows = "graph r(%x: f32[8, 40000]) {\n  %e = exp(%x) : f32[8, 40000]\n"
                        "  %t = sum(%e, [1]) : f32[8]\n  %m = amax(%x, [1]) : f32[8]\n  return %t, %m\n}\n";

// The candidates of every kernel of `g` compiled in max-autotune mode (compiled for sm_90 where there is no GPU).
std::vector<std::vector<cuda::AutotuneCandidate>> candidates_of(const graph::Graph& g) {
  std::shared_ptr<CompiledGraph> c = compile(g, autotune_options());
  const CompiledGraph::Impl& impl = *c->impl();
  std::vector<std::vector<cuda::AutotuneCandidate>> out;
  for (size_t k = 0; k < impl.schedule.kernels.size(); ++k) {
    const auto& kernels = dynamic_cast<const cuda::CudaKernels&>(*impl.kernels);
    out.push_back(cuda::autotune_candidates(impl.schedule.kernels[k], impl.lowered, kernels.args(int(k)),
                                            kernels.kernel(int(k))));
  }
  return out;
}

std::vector<std::string> labels(const std::vector<cuda::AutotuneCandidate>& cs) {
  std::vector<std::string> out;
  for (const auto& c : cs) out.push_back(c.label);
  return out;
}

TEST(CudaAutotune, FlatKernelsTryBlockSizesAndEveryCandidateCompiles) {
  auto cs = candidates_of(parse(kPointwise));
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(labels(cs[0]), (std::vector<std::string>{"block 256", "block 128", "block 512", "block 1024"}));
  for (const auto& c : cs[0]) {
    EXPECT_EQ(c.code.work, cs[0][0].code.work) << c.label << ": the same problem";
    EXPECT_EQ(c.code.spans, cs[0][0].code.spans) << c.label << ": the same elements touched";
    EXPECT_NE(c.code.source.find("__launch_bounds__(" + std::to_string(c.code.block) + ")"), std::string::npos) << c.label;
    EXPECT_NO_THROW(cuda::cubin_for(c.code.source, cuda::target_arch())) << c.label;
  }
}

TEST(CudaAutotune, PersistentRowsTrySlotsAndRowsReadFromMemory) {
  auto cs = candidates_of(parse(kSoftmax));
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(labels(cs[0]), (std::vector<std::string>{"persistent rows, 16 slots (block 256)",
                                                     "persistent rows, 8 slots (block 512)",
                                                     "persistent rows, 32 slots (block 128)",
                                                     "rows, block 512 (not persistent)"}));
  EXPECT_TRUE(cs[0][0].code.persistent);
  EXPECT_FALSE(cs[0].back().code.persistent);
  for (const auto& c : cs[0]) EXPECT_NO_THROW(cuda::cubin_for(c.code.source, cuda::target_arch())) << c.label;
}

TEST(CudaAutotune, RowsAndSplitReductionsTryBlockSizes) {
  auto cs = candidates_of(parse(kLongRows));
  ASSERT_FALSE(cs.empty());
  for (const auto& kernel : cs) {
    ASSERT_GE(kernel.size(), 2u) << kernel[0].label;
    for (const auto& c : kernel) {
      EXPECT_TRUE(c.code.rows) << c.label;
      EXPECT_EQ(c.code.split, kernel[0].code.split) << c.label << ": the split (and so the workspace) is the default's";
      EXPECT_EQ(c.code.workspace_bytes, kernel[0].code.workspace_bytes) << c.label;
      EXPECT_NO_THROW(cuda::cubin_for(c.code.source, cuda::target_arch())) << c.label;
    }
  }
}

TEST(CudaAutotune, TheDefaultIsKeptUnlessAnotherIsClearlyFaster) {
  std::vector<cuda::AutotuneCandidate> cs(3);
  cs[0].label = "block 256";
  cs[1].label = "block 512";
  cs[2].label = "block 1024";
  cuda::AutotuneResult r = cuda::choose_candidate(cs, {1.0, 0.99, -1});
  EXPECT_EQ(r.chosen, 0) << "1% faster is noise: " << r.reason;
  EXPECT_NE(r.reason.find("kept the default"), std::string::npos) << r.reason;
  r = cuda::choose_candidate(cs, {1.0, 0.8, 0.9});
  EXPECT_EQ(r.chosen, 1) << r.reason;
  EXPECT_NE(r.reason.find("1.25x"), std::string::npos) << r.reason;
  r = cuda::choose_candidate(cs, {1.0, -1, 0.5});
  EXPECT_EQ(r.chosen, 2) << "a candidate that could not run is skipped: " << r.reason;
  r = cuda::choose_candidate(cs, {0.5, 0.9, 1.0});
  EXPECT_EQ(r.chosen, 0);
  EXPECT_EQ(r.reason, "the default is the fastest");
}

TEST(CudaAutotune, ChoicesAreFoundOnDiskByASecondProcess) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / fmt::format("kiln-autotune-{}", ::getpid());
  std::filesystem::remove_all(dir);
  ScopedOption cache(Opt::CacheDir, dir.string());
  auto cs = candidates_of(parse(kSoftmax))[0];
  const std::string material = cuda::autotune_key_material(cs, "sm_90", "NVIDIA H200");
  EXPECT_NE(material.find("work 64"), std::string::npos) << "keyed by the problem size: " << material;
  EXPECT_NE(cuda::autotune_key_material(cs, "sm_90", "NVIDIA H100 80GB HBM3"), material) << "and by the GPU";
  EXPECT_EQ(cuda::find_autotune_choice(material), "");
  cuda::store_autotune_choice(material, cs[2].label);
  const cuda::AutotuneStats before = cuda::autotune_stats();
  cuda::forget_memory_autotune_choices();  // a second process: only the disk
  std::string from;
  EXPECT_EQ(cuda::find_autotune_choice(material, &from), cs[2].label);
  EXPECT_EQ(from, "disk cache");
  EXPECT_EQ(cuda::autotune_stats().disk_hits, before.disk_hits + 1);
  EXPECT_EQ(cuda::find_autotune_choice(material, &from), cs[2].label);
  EXPECT_EQ(from, "memory cache");
  EXPECT_TRUE(std::filesystem::exists(dir / fmt::format("cuda-autotune-v{}", cuda::kAutotuneVersion)))
      << "beside the cubin cache, under KILN_CACHE_DIR";
  std::filesystem::remove_all(dir);
}

TEST(CudaAutotune, ProgramsCompileWithoutAGpuAndSayWhyTheyCannotRun) {
  std::string why;
  if (cuda::device_available(&why)) GTEST_SKIP() << "this machine has a GPU";
  graph::Graph g = parse(kSoftmax);
  std::shared_ptr<CompiledGraph> c = compile(g, autotune_options());
  try {
    (*c)(graph::seeded_inputs(g, 0));
    FAIL() << "ran without a GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------- on a GPU

#define SKIP_WITHOUT_GPU()                                                              \
  do {                                                                                  \
    std::string why;                                                                    \
    if (!cuda::device_available(&why)) GTEST_SKIP() << "needs a CUDA device: " << why;  \
  } while (0)

CompareVerdict run_against_interpreter(const graph::Graph& g, const CompileOptions& o) {
  std::vector<Tensor> inputs = graph::seeded_inputs(g, 3);
  std::vector<Tensor> expected = graph::run_graph(g, inputs);
  graph::InterpretOptions fp64;
  fp64.fp64 = true;
  std::vector<Tensor> reference = graph::run_graph(g, inputs, fp64);
  std::vector<Tensor> got = (*compile(g, o))(inputs);
  return compare_outputs(expected, got, reference);
}

TEST(CudaGpuAutotune, TunedProgramsEqualTheInterpreterAndTheChoicesAreCached) {
  SKIP_WITHOUT_GPU();
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / fmt::format("kiln-autotune-gpu-{}", ::getpid());
  std::filesystem::remove_all(dir);
  ScopedOption cache(Opt::CacheDir, dir.string());
  for (const char* text : {kPointwise, kSoftmax, kLongRows}) {
    graph::Graph g = parse(text);
    const cuda::AutotuneStats before = cuda::autotune_stats();
    CompareVerdict v = run_against_interpreter(g, autotune_options());
    EXPECT_TRUE(v.ok) << g.name << " tuned: " << v.str();
    const cuda::AutotuneStats tuned = cuda::autotune_stats();
    EXPECT_GT(tuned.measured, before.measured) << g.name << ": the first call times its kernels";
    v = run_against_interpreter(g, autotune_options());
    EXPECT_TRUE(v.ok) << g.name << " again: " << v.str();
    EXPECT_EQ(cuda::autotune_stats().measured, tuned.measured) << g.name << ": a second compile does not time again";
    EXPECT_GT(cuda::autotune_stats().memory_hits, tuned.memory_hits) << g.name;
    cuda::forget_memory_autotune_choices();
    v = run_against_interpreter(g, autotune_options());
    EXPECT_TRUE(v.ok) << g.name << " from disk: " << v.str();
    EXPECT_EQ(cuda::autotune_stats().measured, tuned.measured) << g.name << ": the choices come from disk";
    EXPECT_GT(cuda::autotune_stats().disk_hits, tuned.disk_hits) << g.name;
  }
  std::filesystem::remove_all(dir);
}


class CudaGpuAutotuneCli : public cli_test::CliTest {};

TEST_F(CudaGpuAutotuneCli, RunLogsCandidatesTimesAndTheChoiceThenTheCache) {
  SKIP_WITHOUT_GPU();
  const std::string kiln = cli_test::kiln_command();
  if (kiln.empty()) GTEST_SKIP() << "no kiln CLI: not at " << KILN_CLI << " and GPU_TEST_KILN is not set";
  const std::string g = file("s.kir", kSoftmax);
  const std::string env = "KILN_CACHE_DIR='" + path("cache") + "' KILN_LOGS=autotune ";
  cli_test::CliResult r = cli_test::shell(env + kiln + " run " + g + " --backend inductor_cuda --mode max-autotune --check");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("candidates timed on"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("persistent rows, 8 slots"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("chosen: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("PASS"), std::string::npos) << r.output;
  r = cli_test::shell(env + kiln + " run " + g + " --backend inductor_cuda --mode max-autotune --check");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("from the disk cache"), std::string::npos) << "a second process does not tune: " << r.output;
  EXPECT_EQ(r.output.find("candidates timed on"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kiln
