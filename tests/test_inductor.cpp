// The CPU inductor: compiled results equal the reference interpreter (through the comparator) for every op of
// the table on random samples (dtypes, broadcasting, non-contiguous inputs, size-0/1 dims, odd sizes), fused
// equals unfused on random graphs, disabling any subsystem site keeps results correct, the fusion decisions
// the issue promises, bug injection, and the kernel cache.
#include <gtest/gtest.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/BinaryFormat/ELF.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Module.h>
#include <llvm/Object/ObjectFile.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <filesystem>
#include <map>

#include "api/backends.h"
#include "core/error.h"
#include "core/options.h"
#include "eager/loops.h"
#include "eager/philox.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "inductor/compile.h"
#include "op_harness.h"
#include "op_samples.h"
#include "random_graphs.h"
#include "ops/api.h"
#include "ops/dispatch.h"
#include "repro/isolate.h"
#include "backends/cpu/host_caches.h"
#include "backends/cpu/jit.h"
#include "backends/cpu/vector_math.h"

namespace kiln {
namespace {

// Every test process compiles into its own kernel cache directory.
struct CacheDirEnvironment : ::testing::Environment {
  void SetUp() override {
    dir = std::filesystem::temp_directory_path() / fmt::format("kiln-test-cache-{}", ::getpid());
    set_option(Opt::CacheDir, dir.string());
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::filesystem::path dir;
};
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new CacheDirEnvironment);

graph::Graph example(const std::string& name) {
  return graph::load_graph(std::string(KILN_SOURCE_DIR) + "/examples/" + name + ".kir");
}

graph::Graph parse(const std::string& text) { return graph::parse_graph(text, "test.kir"); }

// ---------------------------------------------------------------- examples and fusion decisions

TEST(Inductor, ExamplesMatchTheInterpreter) {
  for (const char* name : {"mlp", "softmax", "layernorm", "attention", "conv_block", "chain100"}) {
    graph::Graph g = example(name);
    CompareVerdict v = compiled_vs_interpreter(g, graph::seeded_inputs(g, 0));
    EXPECT_TRUE(v.ok) << name << ": " << v.str();
  }
}

TEST(Inductor, Chain100IsOneKernel) {
  std::shared_ptr<CompiledGraph> c = compile(example("chain100"));
  EXPECT_EQ(c->stats().kernels, 1) << c->loop_ir();
  EXPECT_EQ(c->stats().extern_calls, 0) << c->loop_ir();
}

TEST(Inductor, SoftmaxAndLayernormOverTheLastDimAreAtMostTwoKernels) {
  graph::Graph s = parse("graph s(%x: f32[64, 100]) {\n  %y = softmax(%x, -1) : f32[64, 100]\n  return %y\n}\n");
  std::shared_ptr<CompiledGraph> cs = compile(s);
  EXPECT_LE(cs->stats().kernels, 2) << cs->loop_ir();
  EXPECT_EQ(cs->stats().extern_calls, 0) << cs->loop_ir();
  graph::Graph l = parse(
      "graph l(%x: f32[64, 100], %w: f32[100], %b: f32[100]) {\n"
      "  %y = layer_norm(%x, [100], %w, %b) : f32[64, 100]\n  return %y\n}\n");
  std::shared_ptr<CompiledGraph> cl = compile(l);
  EXPECT_LE(cl->stats().kernels, 2) << cl->loop_ir();
  EXPECT_EQ(cl->stats().extern_calls, 0) << cl->loop_ir();
  EXPECT_TRUE(compiled_vs_interpreter(s, graph::seeded_inputs(s, 1)).ok);
  EXPECT_TRUE(compiled_vs_interpreter(l, graph::seeded_inputs(l, 1)).ok);
}

// exp(x - max) is read by the sum and by the division: computed once per element into a kernel-local scratch
// row (in cache), not recomputed and not a buffer in memory: the program's peak is its output and row results.
TEST(Inductor, SoftmaxComputesExpOnceIntoAKernelLocalRow) {
  graph::Graph s = parse("graph s(%x: f32[64, 1000]) {\n  %y = softmax(%x, -1) : f32[64, 1000]\n  return %y\n}\n");
  std::shared_ptr<CompiledGraph> c = compile(s);
  const std::string& ir = c->loop_ir();
  EXPECT_EQ(c->stats().kernels, 1) << ir;
  size_t exps = 0;
  for (size_t at = ir.find("Exp("); at != std::string::npos; at = ir.find("Exp(", at + 1)) ++exps;
  EXPECT_EQ(exps, 1u) << ir;
  EXPECT_NE(ir.find("kernel-local"), std::string::npos) << ir;
  std::vector<Tensor> inputs = graph::seeded_inputs(s, 2);
  int64_t base = Storage::live_bytes();
  Storage::reset_peak_bytes();
  std::vector<Tensor> out = (*c)(inputs);
  const int64_t output_bytes = 64 * 1000 * 4;
  EXPECT_LT(Storage::peak_bytes() - base, output_bytes + output_bytes / 2) << ir;
  EXPECT_TRUE(compiled_vs_interpreter(s, inputs).ok);
}

// Outputs of at least KILN_STREAM_MIN_BYTES (set here, so every host runs the test at the same size) are written
// with streaming (non-temporal) stores, from a loop split at the first 64-byte boundary; the multi-loop kernel
// also prefetches its next row. Rows that start at any alignment, odd lengths and the parallel split must keep
// every element right.
TEST(Inductor, StreamedStoresKeepResultsExactAtAnyAlignment) {
  ScopedOption threshold(Opt::StreamMinBytes, "1M");
  const int64_t elems = (int64_t(1) << 20) / 4 + 4099;
  const int64_t cols = (elems / 7) | 1, rows = 7, flat = elems | 1;
  std::vector<graph::Graph> graphs = {
      parse(fmt::format("graph p(%x: f32[{0}], %y: f32[{0}]) {{\n  %a = mul(%x, %y) : f32[{0}]\n"
                        "  %b = add(%a, 1.5) : f32[{0}]\n  return %b\n}}\n", flat)),
      parse(fmt::format("graph q(%x: f32[{0}, {1}]) {{\n  %a = sigmoid(%x) : f32[{0}, {1}]\n  return %a\n}}\n", rows, cols)),
      parse(fmt::format("graph l(%x: f32[{0}, {1}], %w: f32[{1}], %b: f32[{1}]) {{\n"
                        "  %y = layer_norm(%x, [{1}], %w, %b) : f32[{0}, {1}]\n  return %y\n}}\n", rows, cols)),
  };
  for (const graph::Graph& g : graphs) {
    runtime::KernelJit::instance().reset_stats();
    std::shared_ptr<CompiledGraph> c = compile(g);
    bool streamed = false;
    for (const std::string& d : c->decisions()) streamed = streamed || d.find("stream the stores") != std::string::npos;
    EXPECT_TRUE(streamed) << g.name << "\n" << c->loop_ir();
    EXPECT_GT(runtime::KernelJit::instance().stats().streaming_stores, 0) << g.name << ": no store was made non-temporal";
    CompareVerdict v = compiled_vs_interpreter(g, graph::seeded_inputs(g, 4));
    EXPECT_TRUE(v.ok) << g.name << ": " << v.str();
  }
}

// The cache a process counts on: its CPUs' private caches plus their share of the last-level cache; a guest
// counts at most kGuestLlcBytesPerCpu a CPU of what it is told is its LLC (the host socket's).
TEST(Inductor, HostCachesCountAGuestsShareOfTheLastLevelCache) {
  const int64_t mb = int64_t(1) << 20;
  runtime::HostCaches vm{2 * mb, 260 * mb, 2, true, 2};
  EXPECT_EQ(vm.usable_bytes(), 2 * 2 * mb + 2 * runtime::kGuestLlcBytesPerCpu) << vm.str();
  runtime::HostCaches bare = vm;
  bare.virtual_machine = false;
  EXPECT_EQ(bare.usable_bytes(), 4 * mb + 260 * mb) << bare.str();
  runtime::HostCaches server{mb, 32 * mb, 16, false, 4};  // 4 threads on a 16-core socket: a quarter of the LLC
  EXPECT_EQ(server.usable_bytes(), 4 * mb + 8 * mb) << server.str();
  {
    ScopedOption forced(Opt::StreamMinBytes, "3M");
    EXPECT_EQ(runtime::streaming_threshold_bytes(), 3 * mb);
  }
  EXPECT_EQ(runtime::streaming_threshold_bytes(), runtime::host_caches().usable_bytes() / 2);
}

// A loop whose arithmetic outweighs its memory traffic (three libm calls an element) keeps ordinary stores above
// the threshold: streaming would gain nothing and cost another copy of the loop to compile.
TEST(Inductor, ComputeBoundLoopsKeepOrdinaryStores) {
  ScopedOption threshold(Opt::StreamMinBytes, "1M");
  graph::Graph g = parse("graph c(%x: f32[300000]) {\n  %a = sin(%x) : f32[300000]\n  %b = tanh(%a) : f32[300000]\n"
                         "  %c = cos(%b) : f32[300000]\n  return %c\n}\n");
  runtime::KernelJit::instance().reset_stats();
  std::shared_ptr<CompiledGraph> c = compile(g);
  std::string decision;
  for (const std::string& d : c->decisions())
    if (d.find("stores") != std::string::npos) decision = d;
  EXPECT_NE(decision.find("ordinary stores"), std::string::npos) << decision << "\n" << c->loop_ir();
  EXPECT_EQ(runtime::KernelJit::instance().stats().streaming_stores, 0);
  EXPECT_TRUE(compiled_vs_interpreter(g, graph::seeded_inputs(g, 6)).ok);
}

// Kernel objects are position-independent: JIT memory lies anywhere in the address space, so every reference to
// a constant or a function must be PC-relative. Without PIC the small code model gave an indexed constant-pool
// load a 32-bit absolute address (a bool input selecting between two constants: the backend loads from a
// two-entry table), which failed to link whenever JIT memory lay above 2 GB ("out of range of Pointer32Signed").
TEST(Inductor, KernelObjectsArePositionIndependent) {
#if defined(__x86_64__)
  graph::Graph g = parse("graph w(%c: bool[], %x: f32[1000]) {\n  %y = where(%c, -2.0, -1.9999961853027344) : f32[]\n"
                         "  %s = softmax(%x, -1) : f32[1000]\n  return %y, %s\n}\n");
  std::shared_ptr<CompiledGraph> c = compile(g);
  EXPECT_TRUE(compiled_vs_interpreter(g, graph::seeded_inputs(g, 7)).ok);
  const std::filesystem::path dir =
      std::filesystem::path(opt_string(Opt::CacheDir)) / fmt::format("kernels-v{}", runtime::kCodegenVersion);
  int objects = 0, relocations = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".o") continue;
    auto object = llvm::object::ObjectFile::createObjectFile(entry.path().string());
    ASSERT_TRUE(bool(object)) << llvm::toString(object.takeError());
    ++objects;
    for (const llvm::object::SectionRef& section : object->getBinary()->sections())
      for (const llvm::object::RelocationRef& r : section.relocations()) {
        ++relocations;
        const uint64_t type = r.getType();
        llvm::SmallString<32> name;
        r.getTypeName(name);
        EXPECT_TRUE(type != llvm::ELF::R_X86_64_32 && type != llvm::ELF::R_X86_64_32S && type != llvm::ELF::R_X86_64_64)
            << entry.path() << ": absolute relocation " << name.str().str();
      }
  }
  EXPECT_GT(objects, 0) << "no kernel object in " << dir;
  EXPECT_GT(relocations, 0);
#else
  GTEST_SKIP() << "checks x86-64 relocation types";
#endif
}

// Softmax-shaped kernels whose output streams: the last loop runs one row late inside the exp loop of the next
// row, and each sweep of rows writes its last row after its loop. Rows of 4112 floats (64-byte aligned,
// kernel-local) and an odd row count, so the threads' ranges differ; the second graph's last loop also reads
// the input row; the third has batches of rows (two outer variables).
// A row length that breaks the alignment is refused, with the reason, and stays correct.
TEST(Inductor, DeferredRowWritesMatchTheInterpreter) {
  ScopedOption threshold(Opt::StreamMinBytes, "1M");
  const int64_t cols = 4112, rows = ((int64_t(1) << 20) / 4 / cols + 8) | 1;
  auto shaped = [&](int64_t c, const std::string& body) {
    return parse(fmt::format("graph d(%x: f32[{0}, {1}]) {{\n{2}  return %y\n}}\n", rows, c, body));
  };
  const std::string softmax = fmt::format("  %y = softmax(%x, -1) : f32[{}, {}]\n", rows, cols);
  const std::string plus_input = fmt::format(
      "  %e = exp(%x) : f32[{0}, {1}]\n  %s = sum(%e, [1], True) : f32[{0}, 1]\n  %q = div(%e, %s) : f32[{0}, {1}]\n"
      "  %y = add(%q, %x) : f32[{0}, {1}]\n", rows, cols);
  const std::string misaligned = fmt::format("  %y = softmax(%x, -1) : f32[{}, {}]\n", rows, cols + 1);
  // Three batches of rows: the threads split the batches, and each batch's sweep of rows starts without a
  // previous row and ends by writing its last.
  const int64_t per_batch = (rows / 3) | 1;
  graph::Graph batched = parse(fmt::format(
      "graph b(%x: f32[3, {0}, {1}]) {{\n  %y = softmax(%x, -1) : f32[3, {0}, {1}]\n  return %y\n}}\n", per_batch, cols));
  for (const auto& [g, deferred] : {std::pair{shaped(cols, softmax), true}, std::pair{shaped(cols, plus_input), true},
                                    std::pair{batched, true}, std::pair{shaped(cols + 1, misaligned), false}}) {
    runtime::KernelJit::instance().reset_stats();
    std::shared_ptr<CompiledGraph> c = compile(g);
    std::string decision;
    for (const std::string& d : c->decisions())
      if (d.find(": write ") != std::string::npos &&
          (d.find("one row late") != std::string::npos || d.find("in its own loop") != std::string::npos))
        decision = d;
    EXPECT_EQ(decision.find("one row late") != std::string::npos, deferred) << decision << "\n" << c->loop_ir();
    if (!deferred) {
      EXPECT_NE(decision.find("64-byte boundaries"), std::string::npos) << decision;
    }
    EXPECT_GT(runtime::KernelJit::instance().stats().streaming_stores, 0) << "no store was made non-temporal";
    CompareVerdict v = compiled_vs_interpreter(g, graph::seeded_inputs(g, 5));
    EXPECT_TRUE(v.ok) << v.str() << "\n" << c->loop_ir();
  }
}

// kiln's own f32 e^x (AVX-512 hosts): within 2 ulp of the correctly rounded result over the whole range,
// the edge values exact (inf, 0, NaN, overflow, underflow through the subnormals), and the same bits whether
// an element falls in a vector or in the scalar remainder (the input shifted by one element gives the same
// outputs, shifted).
TEST(Inductor, FastExpIsWithinTwoUlpAndIndependentOfPosition) {
  if (!runtime::has_fast_vector_math()) GTEST_SKIP() << "the host has no AVX-512: exp is libm's";
  std::vector<float> xs = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 88.72f, 88.73f, 100.0f, -87.3f, -87.4f,
                           -100.0f, -103.9f, -104.0f, -150.0f, 1e-30f, -1e-30f, 0.5f, -0.5f};
  uint64_t state = 12345;
  while (xs.size() < 100003) {  // odd: the last elements run in the scalar remainder
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    xs.push_back(-110.0f + 200.0f * float(state >> 40) / float(1 << 24));
  }
  auto run = [&](const std::vector<float>& in) {
    graph::Graph g = parse(fmt::format("graph e(%x: f32[{0}]) {{\n  %y = exp(%x) : f32[{0}]\n  return %y\n}}\n", in.size()));
    Tensor out = (*compile(g))({Tensor::from_vector<float>(in, {int64_t(in.size())})})[0];
    return std::vector<float>(out.data<float>(), out.data<float>() + in.size());
  };
  std::vector<float> ys = run(xs);
  std::vector<float> shifted_in = xs;
  shifted_in.insert(shifted_in.begin(), 1.0f);
  std::vector<float> shifted = run(shifted_in);
  int far = 0, moved = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = std::exp(double(xs[i]));
    const float got = ys[i];
    if (std::isnan(xs[i])) {
      EXPECT_TRUE(std::isnan(got));
    } else if (std::isinf(float(want)) || float(want) == 0.0f) {
      if (got != float(want) && ++far < 5) ADD_FAILURE() << "exp(" << xs[i] << ") = " << got << ", want " << float(want);
    } else {
      int e = 0;
      std::frexp(float(want), &e);
      const double ulp = std::max(std::ldexp(1.0, e - 24), double(std::numeric_limits<float>::denorm_min()));
      if (std::abs(double(got) - want) > 2 * ulp && ++far < 5)
        ADD_FAILURE() << "exp(" << xs[i] << ") = " << got << ", want " << want << " (" << std::abs(got - want) / ulp << " ulp)";
    }
    if (std::memcmp(&ys[i], &shifted[i + 1], 4) != 0 && ++moved < 5)
      ADD_FAILURE() << "exp(" << xs[i] << ") is " << ys[i] << " at " << i << " but " << shifted[i + 1] << " at " << i + 1;
  }
  EXPECT_EQ(far, 0);
  EXPECT_EQ(moved, 0);
}

TEST(Inductor, MlpForwardHasNoKernelThatOnlyCopies) {
  std::shared_ptr<CompiledGraph> c = compile(example("mlp"));
  EXPECT_EQ(c->stats().copy_kernels, 0) << c->loop_ir();
}

TEST(Inductor, ViewsLowerToIndexArithmetic) {
  graph::Graph g = parse(
      "graph v(%x: f32[6, 4]) {\n"
      "  %t = transpose(%x, 0, 1) : f32[4, 6]{1, 4}\n"
      "  %r = reshape(%t, [2, 12]) : f32[2, 12]\n"
      "  %s = slice(%r, 1, 1, 11, 3) : f32[2, 4]{12, 3}\n"
      "  %e = exp(%s) : f32[2, 4]\n"
      "  return %e\n}\n");
  std::shared_ptr<CompiledGraph> c = compile(g);
  EXPECT_EQ(c->stats().kernels, 1) << c->loop_ir();
  EXPECT_EQ(c->stats().extern_calls, 0) << c->loop_ir();
  EXPECT_TRUE(compiled_vs_interpreter(g, graph::seeded_inputs(g, 3)).ok);
}

TEST(Inductor, MaxAndMinReductionsKeepNaNInfinityAndSignedZero) {
  graph::Graph g = parse(
      "graph m(%x: f32[6, 9]) {\n  %a = amax(%x, [1]) : f32[6]\n  %b = amin(%x, [1]) : f32[6]\n"
      "  %c = argmax(%x, 1) : i64[6]\n  return %a, %b, %c\n}\n");
  const float inf = INFINITY, nan = NAN, negative_nan = -NAN;
  Tensor x = Tensor::from_vector<float>(
      {1, 2, nan, 4, 5, -3, 0, 8, 2,                  // a NaN wins
       -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf,
       -0.0f, 0.0f, -0.0f, -1, -2, 0.0f, -0.0f, -5, -7,
       3, 3, 1e30f, -1e30f, inf, 2, -inf, 0, 1,
       1, 2, 3, negative_nan, 5, 6, 7, 8, 9,          // a NaN with its sign bit set wins too
       inf, inf, inf, inf, inf, inf, inf, inf, inf},
      {6, 9});
  CompareVerdict v = compiled_vs_interpreter(g, {x});
  EXPECT_TRUE(v.ok) << v.str();
  // Rows of 37: two 16-float vectors and a scalar remainder, each special value placed in the vector part.
  graph::Graph wide = parse(
      "graph w(%x: f32[7, 37]) {\n  %a = amax(%x, [1]) : f32[7]\n  %b = amin(%x, [1]) : f32[7]\n  return %a, %b\n}\n");
  std::vector<float> rows(7 * 37);
  for (int64_t r = 0; r < 7; ++r)
    for (int64_t i = 0; i < 37; ++i) rows[size_t(r * 37 + i)] = float((i * 7 + r * 3) % 23) - 11.0f;  // mixed signs
  auto row = [&](int64_t r) { return rows.begin() + r * 37; };
  std::transform(row(0), row(1), row(0), [](float f) { return -std::fabs(f) - 1; });  // all negative
  std::transform(row(1), row(2), row(1), [](float f) { return std::fabs(f) + 1; });   // all positive
  rows[size_t(2 * 37 + 5)] = nan;                                                         // NaN among mixed signs
  std::transform(row(3), row(4), row(3), [](float f) { return std::fabs(f) + 1; });
  rows[size_t(3 * 37 + 20)] = negative_nan;                                               // -NaN among positives
  std::transform(row(4), row(5), row(4), [](float f) { return -std::fabs(f) - 1; });
  rows[size_t(4 * 37 + 3)] = -0.0f;                                                       // -0 among negatives
  rows[size_t(5 * 37 + 17)] = -inf, rows[size_t(5 * 37 + 2)] = inf;                      // both infinities
  std::transform(row(6), row(7), row(6), [](float f) { return -std::fabs(f) - 1; });
  rows[size_t(6 * 37 + 9)] = nan;                                                         // NaN among negatives
  v = compiled_vs_interpreter(wide, {Tensor::from_vector<float>(rows, {7, 37})});
  EXPECT_TRUE(v.ok) << v.str();
}

// Rows of 200 (three blocks of the max loop's 4 x 16 floats and a remainder) holding NaN, infinities and
// signed zeros, placed in the vector part.
constexpr int64_t kSpecialCols = 200;
Tensor special_rows(int64_t rows) {
  const float inf = INFINITY, nan = NAN;
  const int64_t n = kSpecialCols;
  std::vector<float> v(size_t(rows * n));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) v[size_t(r * n + i)] = float((i * 7 + r * 3) % 23) * 0.25f - 3.0f;
  auto at = [&](int64_t r, int64_t i) -> float& { return v[size_t(r * n + i)]; };
  auto fill = [&](int64_t r, auto value) { for (int64_t i = 0; i < n; ++i) at(r, i) = value(i); };
  at(0, 70) = nan;                                          // a NaN: the whole row is NaN
  at(1, 20) = inf;                                          // +inf: the max is inf, every x - max is NaN or -inf
  at(2, 3) = -inf;                                          // -inf: exp gives 0 there
  fill(3, [&](int64_t) { return -inf; });                   // all -inf: NaN
  fill(4, [](int64_t i) { return i % 2 ? 0.0f : -0.0f; });  // zeros of both signs
  at(5, 9) = nan, at(5, 130) = inf;                         // NaN beside +inf
  fill(6, [&](int64_t) { return nan; });                    // all NaN
  at(7, 1) = 1e30f, at(7, 2) = -1e30f;                      // far apart: exp underflows to 0 but for the max
  return Tensor::from_vector<float>(v, {rows, n});
}

// Softmax's max may skip NaN (a NaN reaches every output of its row through the row's sum whatever the max is),
// so on AVX-512 hosts it is one vmaxps an element; the results stay exact on rows of special values. A max the
// graph also returns, or one whose sum runs over other dims, keeps NaN.
TEST(Inductor, SoftmaxMaxSkipsNaNAndRowsOfSpecialValuesStayExact) {
  const Tensor x = special_rows(8);
  for (const char* op : {"softmax", "log_softmax"}) {
    graph::Graph g = parse(fmt::format("graph s(%x: f32[8, 200]) {{\n  %y = {}(%x, -1) : f32[8, 200]\n  return %y\n}}\n", op));
    std::shared_ptr<CompiledGraph> c = compile(g);
    EXPECT_NE(c->loop_ir().find("reduce max (NaN-insensitive)"), std::string::npos) << op << "\n" << c->loop_ir();
    CompareVerdict v = compiled_vs_interpreter(g, {x});
    EXPECT_TRUE(v.ok) << op << ": " << v.str();
  }
  graph::Graph hand = example("softmax");  // written out step by step
  EXPECT_NE(compile(hand)->loop_ir().find("(NaN-insensitive)"), std::string::npos) << compile(hand)->loop_ir();
  const std::vector<std::string> exact = {
      // the max is also an output
      "graph m(%x: f32[8, 200]) {\n  %m = amax(%x, [1], True) : f32[8, 1]\n  %d = sub(%x, %m) : f32[8, 200]\n"
      "  %e = exp(%d) : f32[8, 200]\n  %s = sum(%e, [1], True) : f32[8, 1]\n  %y = div(%e, %s) : f32[8, 200]\n"
      "  return %y, %m\n}\n",
      // the sum runs down the columns: a row's NaN reaches only its own column's outputs through it
      "graph a(%x: f32[8, 200]) {\n  %m = amax(%x, [1], True) : f32[8, 1]\n  %d = sub(%x, %m) : f32[8, 200]\n"
      "  %e = exp(%d) : f32[8, 200]\n  %s = sum(%e, [0], True) : f32[1, 200]\n  %y = div(%e, %s) : f32[8, 200]\n"
      "  return %y\n}\n",
      // exp(x - max) is also an output
      "graph e(%x: f32[8, 200]) {\n  %m = amax(%x, [1], True) : f32[8, 1]\n  %d = sub(%x, %m) : f32[8, 200]\n"
      "  %e = exp(%d) : f32[8, 200]\n  %s = sum(%e, [1], True) : f32[8, 1]\n  %y = div(%e, %s) : f32[8, 200]\n"
      "  return %y, %e\n}\n",
  };
  Tensor one_nan = clone(graph::seeded_inputs(parse(exact[0]), 6)[0]);
  one_nan.data<float>()[70] = NAN;  // row 0 only
  for (const std::string& text : exact) {
    graph::Graph g = parse(text);
    std::shared_ptr<CompiledGraph> c = compile(g);
    EXPECT_EQ(c->loop_ir().find("NaN-insensitive"), std::string::npos) << g.name << "\n" << c->loop_ir();
    CompareVerdict v = compiled_vs_interpreter(g, {one_nan});
    EXPECT_TRUE(v.ok) << g.name << ": " << v.str();
  }
}

// The NaN-skipping max rewrites every vector llvm.maximum of its kernel's module, so a kernel that also computes
// a pointwise maximum (which must propagate NaN) keeps the exact max reduction.
TEST(Inductor, PointwiseMaximumBesideASoftmaxKeepsNaN) {
  graph::Graph g = parse(
      "graph s(%x: f32[8, 200], %z: f32[8, 200]) {\n  %y = softmax(%x, -1) : f32[8, 200]\n"
      "  %w = maximum(%y, %z) : f32[8, 200]\n  return %w\n}\n");
  std::shared_ptr<CompiledGraph> c = compile(g);
  EXPECT_EQ(c->stats().kernels, 1) << c->loop_ir();
  std::vector<float> z(8 * kSpecialCols, 0.5f);
  for (size_t i = 0; i < z.size(); i += 7) z[i] = NAN;
  CompareVerdict v = compiled_vs_interpreter(g, {special_rows(8), Tensor::from_vector<float>(z, {8, kSpecialCols})});
  EXPECT_TRUE(v.ok) << v.str();
}

// The pass behind the NaN-skipping max: in a marked module each vector llvm.maximum becomes the x86 max
// instruction; scalars, and every call of an unmarked module, stay as they are.
TEST(Inductor, MaxSkippingNanReplacesVectorMaximaOfMarkedModulesOnly) {
  for (bool marked : {false, true}) {
    llvm::LLVMContext ctx;
    llvm::Module m("t", ctx);
    llvm::IRBuilder<> b(ctx);
    auto* v16 = llvm::FixedVectorType::get(b.getFloatTy(), 16);
    auto* fn = llvm::Function::Create(llvm::FunctionType::get(v16, {v16, v16, b.getFloatTy()}, false),
                                      llvm::Function::ExternalLinkage, "f", m);
    b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
    llvm::Value* s = b.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, fn->getArg(2), fn->getArg(2));
    llvm::Value* v = b.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, fn->getArg(0), fn->getArg(1));
    b.CreateRet(b.CreateFAdd(v, b.CreateVectorSplat(16, s)));
    if (marked) runtime::mark_max_skipping_nan(m);
    EXPECT_EQ(runtime::lower_max_skipping_nan(m), marked ? 1 : 0);
    int maxima = 0, x86 = 0;
    for (llvm::Instruction& i : fn->getEntryBlock())
      if (auto* call = llvm::dyn_cast<llvm::IntrinsicInst>(&i)) {
        maxima += call->getIntrinsicID() == llvm::Intrinsic::maximum;
        x86 += call->getIntrinsicID() == llvm::Intrinsic::x86_avx512_max_ps_512;
      }
    EXPECT_EQ(maxima, marked ? 1 : 2);
    EXPECT_EQ(x86, marked ? 1 : 0);
  }
}

// A sum or product over the row the previous loop just wrote (softmax's sum of exp; here also a product), over
// prefetched blocks and remainders (rows of 1000 and 70), and a sum that reads the row in another order.
TEST(Inductor, ReductionsOfTheRowJustWrittenMatchTheInterpreter) {
  const std::vector<std::string> texts = {
      "graph s(%x: f32[64, 1000]) {\n  %y = softmax(%x, -1) : f32[64, 1000]\n  return %y\n}\n",
      "graph p(%x: f32[16, 70]) {\n  %e = exp(%x) : f32[16, 70]\n  %p = prod(%e, 1, True) : f32[16, 1]\n"
      "  %y = div(%e, %p) : f32[16, 70]\n  return %y\n}\n",
      "graph f(%x: f32[16, 70]) {\n  %e = exp(%x) : f32[16, 70]\n  %f = flip(%e, [1]) : f32[16, 70]\n"
      "  %s = sum(%f, [1], True) : f32[16, 1]\n  %y = div(%e, %s) : f32[16, 70]\n  return %y\n}\n",
  };
  for (const std::string& text : texts) {
    graph::Graph g = parse(text);
    CompareVerdict v = compiled_vs_interpreter(g, graph::seeded_inputs(g, 3));
    EXPECT_TRUE(v.ok) << g.name << ": " << v.str();
  }
}

TEST(Inductor, NonContiguousInputsAreRead) {
  graph::Graph g = parse("graph n(%x: f32[5, 7]) {\n  %y = sigmoid(%x) : f32[5, 7]\n  return %y\n}\n");
  Tensor base = graph::seeded_inputs(g, 2)[0];
  Tensor wide = Tensor::empty({5, 14});
  Tensor x = slice(wide, 1, 0, 14, 2);
  copy_into(x, base);
  std::shared_ptr<CompiledGraph> c = compile(g);
  std::vector<Tensor> out = (*c)({x});
  CompareVerdict v = compare_outputs({sigmoid(base)}, out);
  EXPECT_TRUE(v.ok) << v.str();
}

// ---------------------------------------------------------------- every op of the table

class InductorOp : public ::testing::TestWithParam<OpRow> {};

// The per-op harness (op_harness.h) on the CPU backend.
TEST_P(InductorOp, CompiledEqualsInterpreter) {
  check_op_compiled_equals_interpreter(GetParam().name,
                                       {"InductorOp", CompileOptions{}, {DType::F32, DType::BF16, DType::F64}, 6});
}

INSTANTIATE_TEST_SUITE_P(Ops, InductorOp, ::testing::ValuesIn(sampled_op_rows()), op_row_name);

// ---------------------------------------------------------------- random graphs

TEST(InductorProperty, FusedEqualsUnfusedEqualsInterpreter) {
  check_property("InductorProperty/FusedEqualsUnfused", [] {
    graph::Graph g = random_lowered_graph();
    std::vector<Tensor> inputs = graph::seeded_inputs(g, *rc::gen::inRange<uint64_t>(0, 1000));
    CompileOptions unfused;
    unfused.fuse = false;
    CompareVerdict fused_v = compiled_vs_interpreter(g, inputs);
    CompareVerdict unfused_v = compiled_vs_interpreter(g, inputs, unfused);
    if (!fused_v.ok || !unfused_v.ok)
      RC_FAIL(fmt::format("fused: {}\nunfused: {}\n{}", fused_v.str(), unfused_v.str(), graph::print_graph(g)));
  }, 30);
}

// Decision 4: every lowering, inlining, fusion and decomposition site asks should_run(); refusing any prefix
// of them must leave a correct (slower) program.
TEST(InductorProperty, DisablingAnySubsystemSiteKeepsResultsCorrect) {
  check_property("InductorProperty/Bisection", [] {
    const int pick = *rc::gen::inRange(0, 4);
    graph::Graph g = pick == 0 ? example("layernorm") : pick == 1 ? example("softmax") : random_lowered_graph();
    std::string subsystem = *rc::gen::element<std::string>("lowering", "inline", "fusion", "localise", "decomposition",
                                                          "stream", "defer", "nan_insensitive_max",
                                                          "contiguous_copy");
    int limit = *rc::gen::inRange(0, 8);
    ScopedOption opt(Opt::BisectLimit, fmt::format("inductor:{}={}", subsystem, limit));
    CompareVerdict v = compiled_vs_interpreter(g, graph::seeded_inputs(g, 5));
    if (!v.ok) RC_FAIL(fmt::format("{} limited to {}: {}\n{}", subsystem, limit, v.str(), graph::print_graph(g)));
  }, 20);
}

// ---------------------------------------------------------------- bug injection

graph::Graph relu_graph() {
  return parse(
      "graph r(%x: f32[4, 9]) {\n  %a = mul(%x, 2.0) : f32[4, 9]\n  %r = relu(%a) : f32[4, 9]\n"
      "  %s = add(%r, 1.0) : f32[4, 9]\n  return %s\n}\n");
}

TEST(InductorInject, CompileErrorIsInvalidIr) {
  ScopedOption inject(Opt::Inject, "relu:compile_error");
  try {
    compile(relu_graph());
    FAIL() << "expected a compile error";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("LLVM IR verification failed"), std::string::npos) << e.what();
  }
}

TEST(InductorInject, RuntimeErrorIsReportedByTheKernel) {
  ScopedOption inject(Opt::Inject, "relu:runtime_error");
  graph::Graph g = relu_graph();
  std::shared_ptr<CompiledGraph> c = compile(g);  // compiles fine
  try {
    (*c)(graph::seeded_inputs(g, 0));
    FAIL() << "expected a runtime error";
  } catch (const CompileError&) {
    FAIL() << "a runtime error must not be a compile error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("runtime error"), std::string::npos) << e.what();
  }
}

TEST(InductorInject, CrashIsASignalInTheKernel) {
  ScopedOption inject(Opt::Inject, "relu:crash");
  graph::Graph g = relu_graph();
  std::vector<Tensor> inputs = graph::seeded_inputs(g, 0);
  IsolatedResult r = run_isolated([&] {
    (*compile(g))(inputs);
    return std::string("no crash");
  }, 60);
  EXPECT_EQ(r.kind, FailureKind::Crash) << r.payload;
}

TEST(InductorInject, AccuracyMakesReluComputeXPlusOne) {
  graph::Graph g = relu_graph();
  std::vector<Tensor> inputs = graph::seeded_inputs(g, 0);
  EXPECT_TRUE(compiled_vs_interpreter(g, inputs).ok);
  ScopedOption inject(Opt::Inject, "relu:accuracy");
  std::vector<Tensor> out = (*compile(g))(inputs);
  // relu(2x) + 1 became (2x + 1) + 1
  std::vector<Tensor> expected = {add(add(mul(inputs[0], 2.0), 1.0), 1.0)};
  EXPECT_TRUE(compare_outputs(expected, out).ok);
  EXPECT_FALSE(compiled_vs_interpreter(g, inputs).ok);
}

TEST(InductorInject, WrongFusionReadsARowNotYetWritten) {
  graph::Graph g = parse(
      "graph f(%x: f32[8, 16]) {\n  %s = sum(%x, [1], True) : f32[8, 1]\n"
      "  %f = flip(%s, [0]) : f32[8, 1]\n  %y = add(%x, %f) : f32[8, 16]\n  return %y\n}\n");
  std::vector<Tensor> inputs = graph::seeded_inputs(g, 0);
  EXPECT_TRUE(compiled_vs_interpreter(g, inputs).ok);
  ScopedOption inject(Opt::Inject, "fusion:accuracy");
  EXPECT_FALSE(compiled_vs_interpreter(g, inputs).ok);
}

TEST(InductorInject, WrongDecompositionOfVar) {
  graph::Graph g = parse("graph v(%x: f32[4, 10]) {\n  %v = var(%x, [1]) : f32[4]\n  return %v\n}\n");
  std::vector<Tensor> inputs = graph::seeded_inputs(g, 0);
  EXPECT_TRUE(compiled_vs_interpreter(g, inputs).ok);
  ScopedOption inject(Opt::Inject, "var:decomposition");
  EXPECT_FALSE(compiled_vs_interpreter(g, inputs).ok);
}

TEST(InductorInject, NothingIsInjectedWhenOff) {
  std::shared_ptr<CompiledGraph> c = compile(relu_graph());
  for (const char* op : {"Trap", "Fail", "Invalid"}) EXPECT_EQ(c->loop_ir().find(op), std::string::npos) << op;
}

TEST(InductorInject, MalformedSpecIsAClearError) {
  try {
    ScopedOption inject(Opt::Inject, "relu:explode");  // rejected when set (options.h), before any compile
    compile(relu_graph());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("compile_error, runtime_error, crash, accuracy"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------- kernel cache

TEST(InductorCache, SecondCompileBuildsNothingAndDiskServesANewIndex) {
  graph::Graph g = parse("graph c(%x: f32[3, 5]) {\n  %y = cosh(%x) : f32[3, 5]\n  %z = mul(%y, 3.5) : f32[3, 5]\n  return %z\n}\n");
  CompileOptions no_graph_cache;
  no_graph_cache.use_graph_cache = false;  // exercise the kernel cache itself
  std::shared_ptr<CompiledGraph> first = compile(g, no_graph_cache);
  std::shared_ptr<CompiledGraph> second = compile(g, no_graph_cache);
  EXPECT_NE(first.get(), second.get());
  EXPECT_EQ(second->stats().kernels_built, 0);
  runtime::KernelJit& jit = runtime::KernelJit::instance();
  jit.forget_memory_cache();
  int64_t disk_before = jit.stats().disk_hits;
  std::shared_ptr<CompiledGraph> third = compile(g, no_graph_cache);
  EXPECT_EQ(third->stats().kernels_built, 0);
  EXPECT_EQ(jit.stats().disk_hits, disk_before + 1);
  EXPECT_TRUE(compiled_vs_interpreter(g, graph::seeded_inputs(g, 0)).ok);
}

TEST(InductorCache, StructurallyEqualGraphsShareTheCompiledProgramUnlessTheOptionsDiffer) {
  graph::Graph a = parse("graph a(%x: f32[3, 5]) {\n  %y = sinh(%x) : f32[3, 5]\n  return %y\n}\n");
  graph::Graph b = parse("graph b(%in: f32[3, 5]) {\n  %out = sinh(%in) : f32[3, 5]\n  return %out\n}\n");
  std::shared_ptr<CompiledGraph> ca = compile(a);
  EXPECT_EQ(compile(b).get(), ca.get());
  {
    ScopedOption inject(Opt::Inject, "sinh:accuracy");
    EXPECT_NE(compile(b).get(), ca.get());
  }
  {
    ScopedOption bisect(Opt::BisectLimit, "inductor:fusion=0");
    EXPECT_NE(compile(b).get(), ca.get());
  }
  graph::Graph c = parse("graph c(%x: f32[3, 6]) {\n  %y = sinh(%x) : f32[3, 6]\n  return %y\n}\n");
  EXPECT_NE(compile(c).get(), ca.get());
}

TEST(InductorCli, RunWithTheInductorBackendChecksAgainstFp64) {
  std::string cmd = fmt::format("{} run {}/examples/softmax.kir --backend inductor --seed 3 --check > /dev/null 2>&1",
                                KILN_CLI, KILN_SOURCE_DIR);
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace
}  // namespace kiln
