// The CUDA backend (docs/cuda.md). Without a GPU (CI here): every lowered op's CUDA C compiles with NVRTC, as do
// reductions and fused chains; the cubin cache hits in memory and on disk; programs start without the driver.
// With a GPU (ci/gpu-test.sh on the device machine; skipped with the reason elsewhere): compiled on the GPU ==
// the fp64 interpreter through the comparator for every op in f32, f16, bf16 and integer dtypes, fused ==
// unfused, and the examples.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstdlib>
#include <filesystem>

#include "api/backends.h"
#include "backends/cuda/device_program.h"
#include "backends/cuda/driver.h"
#include "backends/cuda/nvrtc.h"
#include "cli_run.h"
#include "core/error.h"
#include "core/options.h"
#include "eager/philox.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "inductor/compile.h"
#include "inductor/lowering_probe.h"
#include "op_harness.h"
#include "op_samples.h"
#include "random_graphs.h"
#include "ops/api.h"
#include "ops/dispatch.h"

namespace kiln {
namespace {

CompileOptions cuda_options(bool fuse = true) {
  CompileOptions o;
  o.device = "cuda";
  o.backend = "inductor_cuda";
  o.fuse = fuse;
  o.use_graph_cache = false;
  return o;
}

graph::Graph parse(const std::string& text) { return graph::parse_graph(text, "test.kir"); }

// The examples, from GPU_TEST_SOURCE_DIR when set (ci/gpu-test.sh --bundle runs these tests away from the tree).
graph::Graph example(const std::string& name) {
  const char* dir = std::getenv("GPU_TEST_SOURCE_DIR");
  return graph::load_graph(std::string(dir && *dir ? dir : KILN_SOURCE_DIR) + "/examples/" + name + ".kir");
}

#define SKIP_WITHOUT_GPU()                                                              \
  do {                                                                                  \
    std::string why;                                                                    \
    if (!cuda::device_available(&why)) GTEST_SKIP() << "needs a CUDA device: " << why;  \
  } while (0)

// ---------------------------------------------------------------- without a GPU

// Every op of the table by name. Which of them the inductor lowers is asked in the test body: the parameters are
// made when the test binary starts, in every test's process, and probing every op's lowering there was 38% of
// each sanitized test process's start (0.22 of 0.59 s, 2230 processes per run).
std::vector<OpRow> table_ops() {
  std::vector<OpRow> rows;
  for (const OpInfo& op : all_ops()) rows.push_back({std::string(op.name)});
  return rows;
}

class CudaOpCompiles : public ::testing::TestWithParam<OpRow> {};

// The probe's one-node graph of every op (lowered, decomposed into lowered ops, or partly extern) compiles for
// the GPU: every kernel's CUDA C passes NVRTC for sm_90 (the device's architecture where there is one).
TEST_P(CudaOpCompiles, EveryKernelCompilesWithNvrtc) {
  const OpInfo* op = find_op(GetParam().name);
  ASSERT_NE(op, nullptr);
  if (inductor::probe_lowering(*op).kind == inductor::OpLowering::Kind::Unknown)
    GTEST_SKIP() << "the inductor does not lower " << op->name;
  inductor::ProbeGraph probe = inductor::one_node_graph(*op);
  if (!probe.decision) GTEST_SKIP() << "no probe call: " << probe.decision.reason();
  try {
    std::shared_ptr<CompiledGraph> c = compile(probe.graph, cuda_options());
    EXPECT_GE(c->stats().kernels, 0);
  } catch (const CompileError& e) {
    FAIL() << e.what() << "\n" << graph::print_graph(probe.graph);
  } catch (const Error& e) {
    // A probe call the pipeline refuses before code generation (eager's storage checks): the CPU must refuse it too.
    CompileOptions cpu = cuda_options();
    cpu.device = "cpu";
    EXPECT_THROW(compile(probe.graph, cpu), Error) << "only the CUDA compile refused it: " << e.what();
    GTEST_SKIP() << "the probe's call is refused before code generation: " << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaOpCompiles, ::testing::ValuesIn(table_ops()), op_row_name);

TEST(CudaCodegen, ExamplesAndEveryDtypeCompile) {
  for (const char* name : {"mlp", "softmax", "layernorm", "attention", "conv_block", "chain100"}) {
    std::shared_ptr<CompiledGraph> c = compile(example(name), cuda_options());
    EXPECT_GT(c->stats().kernels, 0) << name;
  }
  for (const char* dt : {"f16", "bf16", "f64", "i64", "i32", "i16", "i8", "u8"}) {
    const std::string text = fmt::format(
        "graph g(%x: {0}[33, 17], %y: {0}[17]) {{\n  %a = mul(%x, %y) : {0}[33, 17]\n  %b = add(%a, %x) : {0}[33, 17]\n"
        "  %s = sum(%b, [1], True) : {1}[33, 1]\n  %m = amax(%b, [1]) : {0}[33]\n  %i = argmax(%b, 1) : i64[33]\n"
        "  return %s, %m, %i\n}}\n",
        dt, std::string(dt)[0] == 'f' || std::string(dt)[0] == 'b' ? dt : "i64");
    EXPECT_NO_THROW(compile(parse(text), cuda_options())) << text;
  }
}

TEST(CudaCodegen, SoftmaxIsBlockReductionsWithWarpShuffles) {
  ScopedOption logs(Opt::Logs, "output_code");
  graph::Graph g = parse("graph s(%x: f32[64, 100]) {\n  %y = softmax(%x, -1) : f32[64, 100]\n  return %y\n}\n");
  std::shared_ptr<CompiledGraph> c = compile(g, cuda_options());
  ASSERT_FALSE(c->kernel_llvm_ir().empty());
  std::string all;
  for (const std::string& code : c->kernel_llvm_ir()) all += code;
  EXPECT_NE(all.find("__global__"), std::string::npos) << all;
  EXPECT_NE(all.find("kiln_block_reduce("), std::string::npos) << all;
  EXPECT_NE(all.find("typedef int idx_t;"), std::string::npos) << "small tensors index in 32 bits\n" << all;
}

// The CUDA C of every kernel of `text`'s graph.
std::string cuda_code(const std::string& text) {
  ScopedOption logs(Opt::Logs, "output_code");
  std::shared_ptr<CompiledGraph> c = compile(parse(text), cuda_options());
  std::string all;
  for (const std::string& code : c->kernel_llvm_ir()) all += code;
  return all;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string softmax_text(const std::string& dt, int64_t rows, int64_t cols) {
  return fmt::format("graph s(%x: {0}[{1}, {2}]) {{\n  %y = softmax(%x, -1) : {0}[{1}, {2}]\n  return %y\n}}\n", dt, rows, cols);
}
std::string layernorm_text(const std::string& dt, int64_t rows, int64_t cols) {
  return fmt::format("graph l(%x: {0}[{1}, {2}], %w: {0}[{2}], %b: {0}[{2}]) {{\n"
                     "  %y = layer_norm(%x, [{2}], %w, %b) : {0}[{1}, {2}]\n  return %y\n}}\n", dt, rows, cols);
}
// Softmax whose sum reads the exp row reversed: the exp row is kernel-local, but not at the elements each thread
// computed, so it lives in shared memory (`cols` f32: > 48 KB from 12289 on) while the input stays in registers.
std::string flipped_sum_text(int64_t rows, int64_t cols) {
  return fmt::format("graph f(%x: f32[{0}, {1}]) {{\n  %m = amax(%x, [1], True) : f32[{0}, 1]\n"
                     "  %d = sub(%x, %m) : f32[{0}, {1}]\n  %e = exp(%d) : f32[{0}, {1}]\n  %r = flip(%e, [1]) : f32[{0}, {1}]\n"
                     "  %s = sum(%r, [1], True) : f32[{0}, 1]\n  %y = div(%e, %s) : f32[{0}, {1}]\n  return %y\n}}\n", rows, cols);
}

std::string reduce_text(const std::string& op, const std::string& dt, const std::string& shape, const std::string& dims,
                        const std::string& out) {
  return fmt::format("graph r(%x: {0}{1}) {{\n  %y = {2}(%x{3}) : {4}\n  return %y\n}}\n", dt, shape, op, dims, out);
}

// Persistent rows (registers, guarded last slots, f16/bf16 rows), shared-memory rows (past the 48 KB a block
// gets unasked: 16000 f32), rows too long for either, and split reductions (long rows at few outer points:
// float sums, integer and bool reductions, a row not a multiple of the split).
std::vector<std::string> row_cases() {
  return {reduce_text("sum", "f32", "[4194305]", "", "f32[]"), reduce_text("sum", "f16", "[3, 300001]", ", [1]", "f16[3]"),
          reduce_text("amin", "i32", "[2, 70000]", ", [1]", "i32[2]"), reduce_text("any", "bool", "[100000]", "", "bool[]"),
          reduce_text("mean", "bf16", "[65536]", "", "bf16[]"),softmax_text("f32", 5, 8192),    softmax_text("f32", 3, 12000),  softmax_text("f16", 4, 1000),
          softmax_text("bf16", 7, 16384),  softmax_text("f32", 2, 16385),  softmax_text("f32", 9, 1),
          layernorm_text("f32", 6, 8192),  layernorm_text("bf16", 5, 3000), flipped_sum_text(3, 12000),
          flipped_sum_text(3, 16000)};
}

TEST(CudaCodegen, RowCasesCompile) {
  for (const std::string& text : row_cases()) EXPECT_NO_THROW(compile(parse(text), cuda_options())) << text;
}

TEST(CudaCodegen, LongReductionsAtFewOuterPointsAreSplit) {
  const std::string code = cuda_code(reduce_text("sum", "f32", "[67108864]", "", "f32[]"));
  EXPECT_NE(code.find("atomicAdd(&arrivals[o], 1u) == 1023u"), std::string::npos) << "1024 blocks a row\n" << code;
  const std::string rows = cuda_code(reduce_text("sum", "f32", "[8192, 8192]", ", [1]", "f32[8192]"));
  EXPECT_EQ(rows.find("arrivals"), std::string::npos) << "8192 rows fill the GPU unsplit\n" << rows;
}

// Persistent rows: softmax and layer norm over 8192 columns read their input row from memory once (its one load
// in the code) and keep softmax's exp row in registers, never in memory (the kernel has no argument for it).
TEST(CudaCodegen, SoftmaxAndLayerNormRowsAreReadOnce) {
  const std::string softmax = cuda_code(softmax_text("f32", 64, 8192));
  EXPECT_EQ(count(softmax, "b0["), 1u) << softmax;
  EXPECT_NE(softmax.find("#pragma unroll"), std::string::npos) << softmax;
  EXPECT_EQ(count(softmax, "float* __restrict__ b"), 4u) << "x, the row max and sum, y; no exp row\n" << softmax;
  EXPECT_EQ(softmax.find("kiln_shared"), std::string::npos) << softmax;
  const std::string layernorm = cuda_code(layernorm_text("f32", 64, 8192));
  EXPECT_EQ(count(layernorm, "b0[(idx_t)8192 * x0 + "), 1u) << layernorm;
}

TEST(CudaCodegen, RowsReadAtOtherElementsAreNotTakenFromRegisters) {
  const std::string code = cuda_code(flipped_sum_text(8, 12000));
  EXPECT_NE(code.find("extern __shared__"), std::string::npos) << code;
  EXPECT_NE(code.find("(idx_t)11999 + (idx_t)-1 * "), std::string::npos) << "the reversed read goes to the shared row\n" << code;
  EXPECT_EQ(count(code, "b0["), 1u) << "the input is still read once\n" << code;
}

TEST(CudaCodegen, RowsLongerThanThePersistentLimitLoopOverMemory) {
  const std::string code = cuda_code(softmax_text("f32", 3, 100000));
  EXPECT_EQ(code.find("#pragma unroll"), std::string::npos) << code;
  EXPECT_GT(count(code, "b0["), 1u) << code;
}

TEST(CudaCodegen, LargeTensorsIndexIn64Bits) {
  ScopedOption logs(Opt::Logs, "output_code");
  graph::Graph g = parse("graph s(%x: f32[3000000000]) {\n  %y = relu(%x) : f32[3000000000]\n  return %y\n}\n");
  std::shared_ptr<CompiledGraph> c = compile(g, cuda_options());
  ASSERT_EQ(c->kernel_llvm_ir().size(), 1u);
  EXPECT_NE(c->kernel_llvm_ir()[0].find("typedef i64 idx_t;"), std::string::npos) << c->kernel_llvm_ir()[0];
}

TEST(CudaCodegen, SecondCompileHitsTheCubinCacheInMemoryThenOnDisk) {
  graph::Graph g = parse("graph c(%x: f32[8, 9]) {\n  %y = sin(%x) : f32[8, 9]\n  %z = mul(%y, %x) : f32[8, 9]\n"
                         "  %w = cos(%z) : f32[8, 9]\n  return %w\n}\n");
  compile(g, cuda_options());
  const cuda::CubinStats first = cuda::cubin_stats();
  std::shared_ptr<CompiledGraph> again = compile(g, cuda_options());
  EXPECT_EQ(again->stats().kernels_built, 0);
  EXPECT_GT(cuda::cubin_stats().memory_hits, first.memory_hits);
  cuda::forget_memory_cubins();
  std::shared_ptr<CompiledGraph> from_disk = compile(g, cuda_options());
  EXPECT_EQ(from_disk->stats().kernels_built, 0);
  EXPECT_GT(cuda::cubin_stats().disk_hits, first.disk_hits);
}

TEST(CudaCodegen, InjectedCompileErrorIsReportedWithNvrtcsMessage) {
  ScopedOption inject(Opt::Inject, "relu:compile_error");
  graph::Graph g = parse("graph r(%x: f32[4]) {\n  %y = relu(%x) : f32[4]\n  return %y\n}\n");
  try {
    compile(g, cuda_options());
    FAIL() << "expected a compile error";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("NVRTC"), std::string::npos) << e.what();
    EXPECT_FALSE(e.internal()) << "an injected failure is not a compiler bug";
  }
}

TEST(CudaCodegen, DebugDirKeepsTheCudaC) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / fmt::format("kiln-cuda-debug-{}", ::getpid());
  {
    ScopedOption debug(Opt::DebugDir, dir.string());
    compile(parse("graph d(%x: f32[4]) {\n  %y = exp(%x) : f32[4]\n  return %y\n}\n"), cuda_options());
  }
  bool found = false;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    found |= e.path().extension() == ".cu";
  EXPECT_TRUE(found) << "no .cu file under " << dir;
  std::filesystem::remove_all(dir);
}

TEST(CudaBuild, ProgramsStartWithoutTheDriverAndRunWithoutAGpuSayWhy) {
  if (!std::filesystem::exists(KILN_CLI)) GTEST_SKIP() << "the kiln CLI of this build is not at " << KILN_CLI << " (a bundle)";
  cli_test::CliResult r = cli_test::shell("kiln --version");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::string why;
  if (cuda::device_available(&why)) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_FALSE(why.empty());
  graph::Graph g = parse("graph r(%x: f32[4]) {\n  %y = relu(%x) : f32[4]\n  return %y\n}\n");
  std::shared_ptr<CompiledGraph> c = compile(g, cuda_options());
  try {
    (*c)(graph::seeded_inputs(g, 0));
    FAIL() << "ran without a GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

TEST(CudaBuild, ReduceOverheadRefusesProgramsWithHostSteps) {
  try {
    cuda::DeviceProgram program(compile(example("mlp"), cuda_options()), cuda::DeviceProgram::Launches::CudaGraph);
    FAIL() << "captured a program with extern calls";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs every step on the GPU"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("BLAS"), std::string::npos) << "says why the step is extern: " << e.what();
  }
}

TEST(CudaBuild, UnknownDeviceIsAClearError) {
  CompileOptions o = cuda_options();
  o.device = "tpu";
  graph::Graph g = parse("graph r(%x: f32[4]) {\n  %y = relu(%x) : f32[4]\n  return %y\n}\n");
  try {
    compile(g, o);
    FAIL() << "compiled for an unknown device";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no inductor backend for device 'tpu'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------- on a GPU

CompareVerdict gpu_vs_interpreter(const graph::Graph& g, const std::vector<Tensor>& inputs, bool fuse = true) {
  return compiled_vs_interpreter(g, inputs, cuda_options(fuse));
}

class CudaGpuOp : public ::testing::TestWithParam<OpRow> {};

// The per-op harness (op_harness.h) on the CUDA backend.
TEST_P(CudaGpuOp, CompiledOnTheGpuEqualsTheInterpreter) {
  SKIP_WITHOUT_GPU();
  check_op_compiled_equals_interpreter(
      GetParam().name, {"CudaGpuOp", cuda_options(), {DType::F32, DType::F16, DType::BF16, DType::I32}, 4});
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaGpuOp, ::testing::ValuesIn(sampled_op_rows()), op_row_name);

TEST(CudaGpu, ExamplesFusedAndUnfusedEqualTheInterpreter) {
  SKIP_WITHOUT_GPU();
  for (const char* name : {"mlp", "softmax", "layernorm", "attention", "conv_block", "chain100"}) {
    graph::Graph g = example(name);
    for (bool fuse : {true, false}) {
      CompareVerdict v = gpu_vs_interpreter(g, graph::seeded_inputs(g, 0), fuse);
      EXPECT_TRUE(v.ok) << name << (fuse ? " fused: " : " unfused: ") << v.str();
    }
  }
}

// Random graphs of lowered ops (tests/random_graphs.h, the CPU's InductorProperty graphs) on the GPU: fused and
// unfused programs equal the fp64 interpreter, and so does the program under any bisection limit of any inductor
// site (a skipped application must leave a correct, slower program on this backend too).
TEST(CudaGpu, RandomGraphsFusedUnfusedAndUnderAnyBisectionLimitEqualTheInterpreter) {
  SKIP_WITHOUT_GPU();
  check_property("CudaGpu/RandomGraphs", [] {
    graph::Graph g = random_lowered_graph();
    const std::vector<Tensor> inputs = graph::seeded_inputs(g, *rc::gen::inRange<uint64_t>(0, 1000));
    for (bool fuse : {true, false}) {
      CompareVerdict v = gpu_vs_interpreter(g, inputs, fuse);
      if (!v.ok) RC_FAIL(fmt::format("{}: {}\n{}", fuse ? "fused" : "unfused", v.str(), graph::print_graph(g)));
    }
    const std::string site = *rc::gen::element<std::string>("lowering", "inline", "fusion", "localise", "decomposition",
                                                            "nan_insensitive_max", "contiguous_copy");
    const int limit = *rc::gen::inRange(0, 8);
    ScopedOption opt(Opt::BisectLimit, fmt::format("inductor:{}={}", site, limit));
    CompareVerdict v = gpu_vs_interpreter(g, inputs);
    if (!v.ok) RC_FAIL(fmt::format("{} limited to {}: {}\n{}", site, limit, v.str(), graph::print_graph(g)));
  }, 30);
}

TEST(CudaGpu, LongRowsAndWholeTensorReductions) {
  SKIP_WITHOUT_GPU();
  for (const char* text : {
           "graph a(%x: f32[3, 100000]) {\n  %y = softmax(%x, -1) : f32[3, 100000]\n  return %y\n}\n",
           "graph b(%x: f32[1000001]) {\n  %s = sum(%x) : f32[]\n  %m = amax(%x, [0]) : f32[]\n  return %s, %m\n}\n",
           "graph c(%x: f16[257, 513]) {\n  %y = sigmoid(%x) : f16[257, 513]\n  %s = sum(%y, [0]) : f16[513]\n  return %s\n}\n",
           "graph d(%x: i32[77, 31]) {\n  %s = sum(%x, [1]) : i64[77]\n  %i = argmin(%x, 1) : i64[77]\n  return %s, %i\n}\n",
       }) {
    graph::Graph g = parse(text);
    CompareVerdict v = gpu_vs_interpreter(g, graph::seeded_inputs(g, 3));
    EXPECT_TRUE(v.ok) << text << v.str();
  }
}

TEST(CudaGpu, PersistentSharedAndSplitRowsEqualTheInterpreter) {
  SKIP_WITHOUT_GPU();
  for (const std::string& text : row_cases()) {
    graph::Graph g = parse(text);
    CompareVerdict v = gpu_vs_interpreter(g, graph::seeded_inputs(g, 5));
    EXPECT_TRUE(v.ok) << text << v.str();
  }
}

// reduce-overhead: a program replayed from its CUDA graph reads the inputs uploaded after the capture.
TEST(CudaGpu, CudaGraphReplaysReadTheLatestInputs) {
  SKIP_WITHOUT_GPU();
  graph::Graph g = parse(layernorm_text("f32", 33, 500));
  cuda::DeviceProgram program(compile(g, cuda_options()), cuda::DeviceProgram::Launches::CudaGraph);
  for (uint64_t seed : {1, 2, 3}) {
    std::vector<Tensor> inputs = graph::seeded_inputs(g, seed);
    program.upload(inputs);
    program.launch();
    program.launch();
    program.synchronize();
    graph::InterpretOptions fp64;
    fp64.fp64 = true;
    CompareVerdict v = compare_outputs(graph::run_graph(g, clones(inputs)), program.download(),
                                       graph::run_graph(g, clones(inputs), fp64));
    EXPECT_TRUE(v.ok) << "seed " << seed << ": " << v.str();
  }
}

CompareVerdict device_program_vs_interpreter(const graph::Graph& g, const std::vector<Tensor>& inputs) {
  cuda::DeviceProgram program(compile(g, cuda_options()));
  program.upload(inputs);
  program.launch();
  program.synchronize();
  graph::InterpretOptions fp64;
  fp64.fp64 = true;
  return compare_outputs(graph::run_graph(g, clones(inputs)), program.download(), graph::run_graph(g, clones(inputs), fp64));
}

// Device programs run what neither the CUDA backend compiles nor cuBLAS runs (nll_loss, convolutions) on the
// host, copying the buffers there and back, and say so on the lowering channel; attention's products all run on
// the GPU (cuBLAS), so nothing of it goes to the host.
TEST(CudaGpu, DeviceProgramsRunExternCallsOnTheHost) {
  SKIP_WITHOUT_GPU();
  ScopedOption logs(Opt::Logs, "lowering");
  for (const auto& [name, on_host] : {std::pair{"mlp", true}, {"conv_block", true}, {"attention", false}}) {
    graph::Graph g = example(name);
    ::testing::internal::CaptureStderr();
    CompareVerdict v = device_program_vs_interpreter(g, graph::seeded_inputs(g, 0));
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_TRUE(v.ok) << name << ": " << v.str();
    EXPECT_EQ(log.find("runs on the host (copied there and back)") != std::string::npos, on_host) << name << ": " << log;
  }
}

std::vector<std::string> product_cases(const std::string& dt) {
  return {fmt::format("graph m(%a: {0}[37, 19], %b: {0}[23, 19]) {{\n  %t = transpose(%b, 0, 1) : {0}[19, 23]{{1, 19}}\n"
                      "  %y = mm(%a, %t) : {0}[37, 23]\n  return %y\n}}\n", dt),
          fmt::format("graph b(%a: {0}[3, 17, 9], %b: {0}[3, 9, 5]) {{\n  %y = bmm(%a, %b) : {0}[3, 17, 5]\n  return %y\n}}\n", dt),
          fmt::format("graph l(%x: {0}[8, 33], %w: {0}[12, 33], %c: {0}[12]) {{\n  %y = linear(%x, %w, %c) : {0}[8, 12]\n"
                      "  return %y\n}}\n", dt),
          fmt::format("graph a(%c: {0}[6, 7], %a: {0}[6, 4], %b: {0}[4, 7]) {{\n"
                      "  %y = addmm(%c, %a, %b, beta=0.5, alpha=2.0) : {0}[6, 7]\n  return %y\n}}\n", dt)};
}

// mm, bmm and addmm (linear's bias, a full addend, beta and alpha) run through cuBLAS on the device buffers in
// every float dtype; an integer product runs on the host and the log says why.
TEST(CudaGpu, MatrixProductsRunThroughCublas) {
  SKIP_WITHOUT_GPU();
  ScopedOption logs(Opt::Logs, "lowering");
  for (const char* dt : {"f32", "f64", "f16", "bf16"})
    for (const std::string& text : product_cases(dt)) {
      graph::Graph g = parse(text);
      ::testing::internal::CaptureStderr();
      CompareVerdict v = device_program_vs_interpreter(g, graph::seeded_inputs(g, 2));
      const std::string log = ::testing::internal::GetCapturedStderr();
      EXPECT_TRUE(v.ok) << text << v.str();
      EXPECT_EQ(log.find("runs on the host"), std::string::npos) << text << log;
    }
  graph::Graph g = parse(product_cases("i32")[0]);
  ::testing::internal::CaptureStderr();
  CompareVerdict v = device_program_vs_interpreter(g, graph::seeded_inputs(g, 2));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(v.ok) << v.str();
  EXPECT_NE(log.find("runs on the host (copied there and back)"), std::string::npos) << log;
  EXPECT_NE(log.find("not i32"), std::string::npos) << log;
}

TEST(CudaCodegen, ProductCasesCompile) {
  for (const char* dt : {"f32", "f64", "f16", "bf16", "i32"}) {
    std::vector<std::string> cases = product_cases(dt);
    if (std::string(dt) == "i32") cases.pop_back();  // addmm's beta 0.5 and alpha 2 need floats
    for (const std::string& text : cases) EXPECT_NO_THROW(compile(parse(text), cuda_options())) << text;
  }
}

// Programs chained on the device: one program's output copied, device to device, into the next one's input.
TEST(CudaGpu, ProgramsChainThroughDeviceViews) {
  SKIP_WITHOUT_GPU();
  graph::Graph first = parse(softmax_text("f32", 40, 300));
  graph::Graph second = parse(reduce_text("sum", "f32", "[40, 300]", ", [1]", "f32[40]"));
  cuda::DeviceProgram a(compile(first, cuda_options())), b(compile(second, cuda_options()));
  std::vector<Tensor> x = graph::seeded_inputs(first, 4);
  a.upload(x);
  a.launch();
  a.synchronize();
  const cuda::DeviceProgram::DeviceView out = a.output(0), in = b.input(0);
  ASSERT_EQ(out.sizes, in.sizes);
  ASSERT_EQ(out.strides, in.strides);
  cuda::check(cuda::driver()->memcpy_dtod(in.data, out.data, size_t(40 * 300 * 4)), "cuMemcpyDtoD");
  b.launch();
  b.synchronize();
  std::vector<Tensor> y = graph::run_graph(first, clones(x));
  graph::InterpretOptions fp64;
  fp64.fp64 = true;
  CompareVerdict v = compare_outputs(graph::run_graph(second, y), b.download(), graph::run_graph(second, y, fp64));
  EXPECT_TRUE(v.ok) << v.str();
  EXPECT_THROW(b.input(1), Error);
}

TEST(CudaGpu, IntegerDivisionByZeroIsReported) {
  SKIP_WITHOUT_GPU();
  graph::Graph g = parse("graph z(%x: i64[4], %y: i64[4]) {\n  %q = div(%x, %y, rounding_mode=\"floor\") : i64[4]\n  return %q\n}\n");
  std::shared_ptr<CompiledGraph> c = compile(g, cuda_options());
  Tensor x = full({4}, Scalar(int64_t(7)), DType::I64), y = zeros({4}, DType::I64);
  try {
    (*c)({x, y});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ZeroDivisionError"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
