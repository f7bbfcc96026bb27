// CUDA tensors (docs/cuda.md, "Device tensors"). Without a GPU: the DeviceHooks interface of src/core, exercised
// through a fake CUDA device whose memory holds every byte inverted, so a kernel that reads device memory as if
// it were host memory computes garbage and the test fails: Tensor::to, the dispatcher's host fallback (results,
// views, in-place writes, autograd), `@cuda` values in .kir (parse, print, verify, inputs, .npy), compile modes
// and their errors. With a GPU (CudaTensorsGpu, skipped elsewhere with the reason): compiled programs on device
// tensors, reduce-overhead replays, the stream-ordered allocator, `kiln run` of a graph of CUDA values.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "cuda_testing.h"
#include "backends/cuda/device_memory.h"
#include "capture/capture.h"
#include "backends/cuda/driver.h"
#include "graph/compare.h"
#include "cli_run.h"
#include "core/device.h"
#include "core/device_hooks.h"
#include "eager/device_copy.h"
#include "core/error.h"
#include "core/options.h"
#include "eager/loops.h"
#include "eager/npy.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "graph/verify.h"
#include "inductor/compile.h"
#include "ops/api.h"
#include "ops/dispatch.h"

namespace kiln {
namespace {

constexpr Device kCuda{DeviceType::CUDA, 0};

// Host memory posing as device memory at addresses nothing maps (as a GPU's are, seen from the host), so a
// kernel that reads a device tensor's memory directly crashes the test as it would crash on a GPU machine. The
// bytes behind each address are stored inverted, so copies that skip the hooks give garbage too.
class UnmappedDevice final : public DeviceHooks {
 public:
  void* allocate(int64_t nbytes, Device) override {
    const uintptr_t address = next_;
    next_ += (uintptr_t(nbytes) + 8191) / 4096 * 4096;  // a gap of unmapped addresses after each block
    blocks_[address] = std::vector<unsigned char>(size_t(nbytes));
    return reinterpret_cast<void*>(address);
  }
  void free(void* p, int64_t, Device) override { blocks_.erase(reinterpret_cast<uintptr_t>(p)); }
  void copy(void* dst, Device to, const void* src, Device from, int64_t nbytes) override {
    auto* d = to.type == DeviceType::CPU ? static_cast<unsigned char*>(dst) : backing(dst, nbytes);
    const auto* s = from.type == DeviceType::CPU ? static_cast<const unsigned char*>(src) : backing(src, nbytes);
    const bool invert = (to.type == DeviceType::CPU) != (from.type == DeviceType::CPU);
    for (int64_t i = 0; i < nbytes; ++i) d[i] = invert ? static_cast<unsigned char>(~s[i]) : s[i];
  }
  size_t live_blocks() const { return blocks_.size(); }

 private:
  uintptr_t next_ = uintptr_t(1) << 46;  // far above the heap and the libraries, below the kernel's half
  std::map<uintptr_t, std::vector<unsigned char>> blocks_;
  unsigned char* backing(const void* p, int64_t nbytes) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    auto it = blocks_.upper_bound(a);
    if (it == blocks_.begin()) ADD_FAILURE() << "copy from an address no block holds";
    --it;
    if (a + uintptr_t(nbytes) > it->first + it->second.size()) ADD_FAILURE() << "copy past the end of a block";
    return it->second.data() + (a - it->first);
  }
};

class DeviceTensors : public ::testing::Test {
 protected:
  void SetUp() override { previous_ = set_device_hooks(DeviceType::CUDA, &device_); }
  void TearDown() override { set_device_hooks(DeviceType::CUDA, previous_); }
  UnmappedDevice device_;
  DeviceHooks* previous_ = nullptr;
};

Tensor host_tensor(std::vector<float> v, Shape sizes) { return Tensor::from_vector(v, sizes); }

TEST_F(DeviceTensors, ToCopiesTheValuesAndKeepsTheLayout) {
  Tensor x = host_tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor d = to_device(x, kCuda);
  EXPECT_EQ(d.device(), kCuda);
  EXPECT_TRUE(is_cuda(d));
  EXPECT_EQ(d.sizes(), x.sizes());
  EXPECT_EQ(d.strides(), x.strides());
  EXPECT_EQ(d.to_double_vector(), x.to_double_vector());
  Tensor back = to_device(d, Device{});
  EXPECT_EQ(back.device(), Device{});
  EXPECT_EQ(back.to_double_vector(), x.to_double_vector());
  EXPECT_TRUE(to_device(d, kCuda).same(d)) << "to() the tensor's own device is the tensor itself";
}

TEST_F(DeviceTensors, ToOfAViewCopiesOnlyTheSpanItCovers) {
  Tensor x = reshape(arange(0, 100, 1, DType::F32), {10, 10});
  Tensor column = select(x, 1, 3);  // 10 elements, stride 10
  Tensor d = to_device(column, kCuda);
  EXPECT_EQ(d.storage()->nbytes(), (9 * 10 + 1) * 4);
  EXPECT_EQ(d.strides(), Shape{10});
  EXPECT_EQ(d.to_double_vector(), column.to_double_vector());
}

TEST_F(DeviceTensors, OpsOnDeviceTensorsGiveDeviceTensorsWithEagerValues) {
  Tensor a = host_tensor({1, -2, 3, -4, 5, -6}, {2, 3}), b = host_tensor({0.5, 1, 2}, {3});
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&, const Tensor&)>>> cases = {
      {"add", [](const Tensor& x, const Tensor& y) { return add(x, y); }},
      {"relu", [](const Tensor& x, const Tensor&) { return relu(x); }},
      {"sum", [](const Tensor& x, const Tensor&) { return sum(x, IntList{1}); }},
      {"matmul", [](const Tensor& x, const Tensor& y) { return matmul(x, y); }},
      {"exp of a transpose", [](const Tensor& x, const Tensor&) { return exp(transpose(x, 0, 1)); }},
      {"mul by a Python number", [](const Tensor& x, const Tensor&) { return mul(x, 2.5); }},
  };
  for (const auto& [name, f] : cases) {
    Tensor expected = f(a, b), got = f(to_device(a, kCuda), to_device(b, kCuda));
    EXPECT_EQ(got.device(), kCuda) << name;
    EXPECT_EQ(got.sizes(), expected.sizes()) << name;
    EXPECT_EQ(got.to_double_vector(), expected.to_double_vector()) << name;
  }
}

Tensor i64_word(int64_t v) { return Tensor::scalar(Scalar(v), DType::I64); }

// Random ops on CUDA tensors draw the CPU's Philox numbers, bit for bit: element i of a draw is a function of
// (seed, offset + i) only (docs/architecture.md, Randomness), wherever it runs.
TEST_F(DeviceTensors, RandomOpsOnDeviceTensorsDrawTheHostsNumbers) {
  Tensor x = reshape(arange(0, 66, 1, DType::F32), {6, 11});
  manual_seed(11);
  const std::vector<Tensor> expected = {
      rand_like(x), randn_like(x), rand_like(x, DType::F64),
      call_op_named("philox_rand", {IntList{6, 11}, i64_word(5), i64_word(1000), std::string("uniform")})[0],
      call_op_named("philox_rand", {IntList{6, 11}, i64_word(5), i64_word(1000), std::string("normal")})[0]};
  Tensor d = to_device(x, kCuda);
  manual_seed(11);
  const std::vector<Tensor> got = {
      rand_like(d), randn_like(d), rand_like(d, DType::F64),
      call_op_named("philox_rand", {IntList{6, 11}, to_device(i64_word(5), kCuda), to_device(i64_word(1000), kCuda),
                                    std::string("uniform")})[0],
      call_op_named("philox_rand", {IntList{6, 11}, to_device(i64_word(5), kCuda), to_device(i64_word(1000), kCuda),
                                    std::string("normal")})[0]};
  for (size_t i = 0; i < got.size(); ++i) {
    if (i < 3) EXPECT_EQ(got[i].device(), kCuda) << i;
    EXPECT_TRUE(same_bits(to_device(got[i], Device{}), expected[i])) << "draw " << i;
  }
}

TEST_F(DeviceTensors, ViewsShareTheDeviceStorageAndInPlaceWritesReachIt) {
  Tensor x = to_device(host_tensor({1, 2, 3, 4, 5, 6}, {2, 3}), kCuda);
  Tensor row = select(x, 0, 1);
  EXPECT_EQ(row.storage(), x.storage()) << "a view of a device tensor is a view of its storage";
  add_(row, 10);
  EXPECT_EQ(x.to_double_vector(), (std::vector<double>{1, 2, 3, 14, 15, 16}));
  add_(x, 1);
  EXPECT_EQ(row.to_double_vector(), (std::vector<double>{15, 16, 17}));
}

// copy_into (every dtype conversion and layout change outside the dispatcher) reaches device memory through the
// host and writes only the destination's elements.
TEST_F(DeviceTensors, CopiesIntoAStridedDeviceViewWriteOnlyItsElements) {
  Tensor x = to_device(host_tensor({0, 0, 0, 0, 0, 0}, {2, 3}), kCuda);
  copy_into(select(x, 1, 1), to_device(host_tensor({7, 8}, {2}), kCuda));
  EXPECT_EQ(x.to_double_vector(), (std::vector<double>{0, 7, 0, 0, 8, 0}));
  Tensor strided_input = graph::seeded_inputs(
      graph::parse_graph("graph t(%x: f32[2, 3]{1, 2}@cuda:0) {\n  return %x\n}\n",
                         "t.kir"), 4)[0];
  EXPECT_EQ(strided_input.strides(), (Shape{1, 2}));
  EXPECT_EQ(strided_input.device(), kCuda);
  EXPECT_EQ(strided_input.to_double_vector(),
            graph::seeded_inputs(graph::parse_graph("graph t(%x: f32[2, 3]) {\n  return %x\n}\n", "t.kir"), 4)[0]
                .to_double_vector());
}

TEST_F(DeviceTensors, MixingDevicesIsAClearErrorButScalarsGoAnywhere) {
  Tensor a = host_tensor({1, 2, 3}, {3});
  try {
    add(to_device(a, kCuda), a);
    FAIL() << "added a CUDA and a CPU tensor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected all tensors on one device"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
  Tensor s = Tensor::scalar(2.0, DType::F32);  // 0-dim: like a Python number
  EXPECT_EQ(mul(to_device(a, kCuda), s).to_double_vector(), (std::vector<double>{2, 4, 6}));
}

TEST_F(DeviceTensors, GradientsOfDeviceLeavesAreDeviceTensors) {
  Tensor w = to_device(host_tensor({1, 2, 3}, {3}), kCuda);
  w.set_requires_grad(true);
  Tensor loss = sum(mul(w, w));
  loss.backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().device(), kCuda);
  EXPECT_EQ(w.grad().to_double_vector(), (std::vector<double>{2, 4, 6}));
}

// Any elementwise chain gives the same values on the (fake) device as on the host.
RC_GTEST_FIXTURE_PROP(DeviceTensors, ChainsOfOpsAgreeWithTheHost, ()) {
  const int64_t n = *rc::gen::inRange<int64_t>(0, 20);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& e : v) e = float(*rc::gen::inRange(-50, 50)) / 4;
  Tensor h = host_tensor(v, {n});
  Tensor d = to_device(h, kCuda);
  for (int step : *rc::gen::container<std::vector<int>>(rc::gen::inRange(0, 4))) {
    auto f = [step](const Tensor& t) { return step == 0 ? relu(t) : step == 1 ? add(t, t) : step == 2 ? mul(t, -0.5) : neg(t); };
    h = f(h);
    d = f(d);
  }
  RC_ASSERT(d.device() == kCuda);
  RC_ASSERT(d.to_double_vector() == h.to_double_vector());
}

// ---------------------------------------------------------------- .kir

const char* kCudaGraph =
    "graph g(%x: f32[2, 3]@cuda:0, %y: f32[3]@cuda:0) {\n"
    "  %s = add(%x, %y) : f32[2, 3]@cuda:0\n"
    "  %r = relu(%s) : f32[2, 3]@cuda:0\n"
    "  return %r\n"
    "}\n";

TEST_F(DeviceTensors, KirValuesOnTheDeviceParsePrintVerifyAndRun) {
  graph::Graph g = graph::parse_graph(kCudaGraph, "g.kir");
  graph::verify_graph(g, "g.kir");
  EXPECT_NE(graph::print_graph(g).find("f32[2, 3]@cuda:0"), std::string::npos) << graph::print_graph(g);
  std::vector<Tensor> inputs = graph::seeded_inputs(g, 1);
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[0].device(), kCuda);
  std::vector<Tensor> outs = graph::run_graph(g, inputs);
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].device(), kCuda);
  std::vector<Tensor> host_inputs = {to_device(inputs[0], Device{}), to_device(inputs[1], Device{})};
  EXPECT_EQ(outs[0].to_double_vector(), relu(add(host_inputs[0], host_inputs[1])).to_double_vector());
}

TEST_F(DeviceTensors, KirDeclaringAResultOnTheWrongDeviceIsRefused) {
  const std::string text =
      "graph g(%x: f32[3]@cuda:0) {\n"
      "  %r = relu(%x) : f32[3]\n"
      "  return %r\n"
      "}\n";
  try {
    graph::Graph g = graph::parse_graph(text, "g.kir");
    graph::verify_graph(g, "g.kir");
    FAIL() << "accepted a result declared on the CPU from a CUDA operand";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("g.kir:2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
}

class DeviceTensorFiles : public DeviceTensors {
 protected:
  std::filesystem::path dir_ = std::filesystem::temp_directory_path() / ("kiln_device_npy_" + std::to_string(::getpid()));
  void SetUp() override {
    DeviceTensors::SetUp();
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    DeviceTensors::TearDown();
  }
};

// What `kiln run G.kir --check --dump DIR` does with a graph of CUDA values, on the fake device.
TEST_F(DeviceTensorFiles, RunCheckAndDumpOfAGraphOfDeviceValues) {
  graph::Graph g = graph::parse_graph(kCudaGraph, "g.kir");
  std::vector<Tensor> inputs = graph::seeded_inputs(g, 0);
  graph::save_inputs(g, inputs, dir_.string());
  std::vector<Tensor> copies = graph::copy_inputs(inputs);
  EXPECT_EQ(copies[0].device(), kCuda) << "copies of inputs stay on their device";
  std::vector<Tensor> outputs = graph::run_graph(g, copies);
  EXPECT_EQ(outputs[0].device(), kCuda);
  write_npy((dir_ / "output_0.npy").string(), outputs[0]);
  format_tensor(outputs[0]);
  CompareVerdict verdict = compare_to_baselines(comparison_baselines(g, inputs), outputs);
  EXPECT_TRUE(verdict.ok) << verdict.str();
}

TEST_F(DeviceTensorFiles, DeviceInputsAndOutputsGoThroughNpyFiles) {
  graph::Graph g = graph::parse_graph(kCudaGraph, "g.kir");
  std::vector<Tensor> inputs = graph::seeded_inputs(g, 3);
  graph::save_inputs(g, inputs, dir_.string());
  std::vector<Tensor> loaded = graph::load_inputs(g, dir_.string());
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded[1].device(), kCuda) << "inputs load onto the device their value declares";
  EXPECT_EQ(loaded[1].to_double_vector(), inputs[1].to_double_vector());
  const std::string out = (dir_ / "out.npy").string();
  write_npy(out, graph::run_graph(g, loaded)[0]);
  EXPECT_EQ(read_npy(out).to_double_vector(), graph::run_graph(g, inputs)[0].to_double_vector());
}

// ---------------------------------------------------------------- compiled programs and modes

TEST_F(DeviceTensors, AProgramCompiledForTheCpuRefusesCudaInputs) {
  graph::Graph g = graph::parse_graph("graph r(%x: f32[4]) {\n  %y = relu(%x) : f32[4]\n  return %y\n}\n", "r.kir");
  CompileOptions cpu;
  cpu.use_graph_cache = false;
  std::shared_ptr<CompiledGraph> c = compile(g, cpu);
  try {
    (*c)({to_device(host_tensor({1, -1, 2, -2}, {4}), kCuda)});
    FAIL() << "ran CPU kernels on device memory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("compiled for the CPU"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("inductor_cuda"), std::string::npos) << e.what();
  }
}

graph::Graph relu_graph() {
  return graph::parse_graph("graph r(%x: f32[4]) {\n  %y = relu(%x) : f32[4]\n  return %y\n}\n", "r.kir");
}

std::string compile_error(const graph::Graph& g, CompileOptions o) {
  o.use_graph_cache = false;
  try {
    compile(g, o);
  } catch (const Error& e) {
    EXPECT_FALSE(e.internal()) << e.what();
    return e.what();
  }
  return "";
}

TEST(CompileModes, UnknownModesAndReduceOverheadOnTheCpuAreClearErrors) {
  CompileOptions o;
  o.mode = "max-speed";
  EXPECT_NE(compile_error(relu_graph(), o).find("unknown compile mode 'max-speed'"), std::string::npos);
  o.mode = "reduce-overhead";
  EXPECT_NE(compile_error(relu_graph(), o).find("needs the CUDA backend"), std::string::npos);
  o.mode = "max-autotune";
  const std::string autotune_why = compile_error(relu_graph(), o);
  EXPECT_NE(autotune_why.find("mode max-autotune times the CUDA backend's kernels"), std::string::npos) << autotune_why;
  EXPECT_NE(autotune_why.find("needs the CUDA backend"), std::string::npos) << autotune_why;
  EXPECT_EQ(CompileOptions{}.mode, "default") << "a compile that names no mode has the default one, never a global";
}

CompileOptions cuda_reduce_overhead() {
  CompileOptions o;
  o.device = "cuda";
  o.backend = "inductor_cuda";
  o.mode = "reduce-overhead";
  return o;
}

TEST(CompileModes, ReduceOverheadNamesTheStepThatCannotBeRecorded) {
  graph::Graph g = graph::parse_graph(
      "graph m(%a: f32[4, 8], %b: f32[8, 2]) {\n  %c = mm(%a, %b) : f32[4, 2]\n  %r = relu(%c) : f32[4, 2]\n"
      "  return %r\n}\n", "m.kir");
  const std::string why = compile_error(g, cuda_reduce_overhead());
  EXPECT_NE(why.find("reduce-overhead cannot record"), std::string::npos) << why;
  EXPECT_NE(why.find("%c"), std::string::npos) << "names the step: " << why;
  EXPECT_EQ(compile_error(relu_graph(), cuda_reduce_overhead()), "") << "a program of kernels only is recorded";
}


class CompileModesCli : public cli_test::CliTest {};

TEST_F(CompileModesCli, RunModeFlagIsCheckedAndWired) {
  const std::string kiln = cli_test::kiln_command();
  if (kiln.empty()) GTEST_SKIP() << "no kiln CLI: not at " << KILN_CLI << " and GPU_TEST_KILN is not set";
  const std::string g = file("r.kir", "graph r(%x: f32[4]) {\n  %y = relu(%x) : f32[4]\n  return %y\n}\n");
  cli_test::CliResult r = cli_test::shell(kiln + " run " + g + " --backend inductor --mode reduce-overhead");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--mode reduce-overhead: mode reduce-overhead replays"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("needs backend inductor_cuda; backend inductor has only mode default"), std::string::npos)
      << r.output;
  r = cli_test::shell(kiln + " run " + g + " --backend inductor --mode max-autotune");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--mode max-autotune: mode max-autotune times the CUDA backend's kernels"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("needs backend inductor_cuda; backend inductor has only mode default"), std::string::npos)
      << r.output;
  r = cli_test::shell(kiln + " run " + g + " --backend inductor_cuda --mode fastest");
  EXPECT_NE(r.exit_code, 0) << r.output;
  const std::string m = file("m.kir", "graph m(%a: f32[4, 8], %b: f32[8, 2]) {\n  %c = mm(%a, %b) : f32[4, 2]\n"
                                      "  return %c\n}\n");
  r = cli_test::shell(kiln + " run " + m + " --backend inductor_cuda --mode reduce-overhead");
  EXPECT_EQ(r.exit_code, 2) << "refused at compile time, with or without a GPU: " << r.output;
  EXPECT_NE(r.output.find("reduce-overhead cannot record"), std::string::npos) << r.output;
  std::string why;
  if (cuda::device_available(&why)) return;
  r = cli_test::shell(kiln + " run " + file("c.kir", kCudaGraph));
  EXPECT_EQ(r.exit_code, 2) << "a graph of CUDA values without a GPU: " << r.output;
  EXPECT_NE(r.output.find(why), std::string::npos) << r.output;
}

// ---------------------------------------------------------------- on a GPU

#define SKIP_WITHOUT_GPU()                                                              \
  do {                                                                                  \
    std::string why;                                                                    \
    if (!cuda::device_available(&why)) GTEST_SKIP() << "needs a CUDA device: " << why;  \
  } while (0)

CompileOptions cuda_compile(const std::string& mode = "default") { return cuda_compile_options(mode); }

std::vector<Tensor> on(Device d, const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(to_device(t, d));
  return out;
}

CompareVerdict against_interpreter(const graph::Graph& g, const std::vector<Tensor>& host_inputs,
                                   const std::vector<Tensor>& got) {
  graph::InterpretOptions fp64;
  fp64.fp64 = true;
  return compare_outputs(graph::run_graph(g, host_inputs), on(Device{}, got), graph::run_graph(g, host_inputs, fp64));
}

const char* kSoftmaxGraph =
    "graph s(%x: f32[37, 300], %y: f32[37, 300]) {\n"
    "  %m = mul(%x, %y) : f32[37, 300]\n"
    "  %s = softmax(%m, 1) : f32[37, 300]\n"
    "  %t = sum(%m, [1]) : f32[37]\n"
    "  return %s, %t\n"
    "}\n";

TEST(CudaTensorsGpu, CompiledProgramsRunOnDeviceTensorsInPlace) {
  SKIP_WITHOUT_GPU();
  for (const char* text : {kSoftmaxGraph, kCudaGraph}) {
    graph::Graph g = graph::parse_graph(text, "g.kir");
    std::vector<Tensor> host = on(Device{}, graph::seeded_inputs(g, 5));
    std::shared_ptr<CompiledGraph> c = compile(g, cuda_compile());
    std::vector<Tensor> got = (*c)(on(kCuda, host));
    for (const Tensor& t : got) EXPECT_EQ(t.device(), kCuda) << "outputs stay on the GPU";
    CompareVerdict v = against_interpreter(g, host, got);
    EXPECT_TRUE(v.ok) << g.name << ": " << v.str();
  }
}

TEST(CudaTensorsGpu, ExternCallsOfDeviceTensorProgramsRunThroughCublasOrTheHost) {
  SKIP_WITHOUT_GPU();
  graph::Graph g = graph::parse_graph(
      "graph m(%a: f32[16, 32], %b: f32[32, 8], %t: i64[16]) {\n  %c = mm(%a, %b) : f32[16, 8]\n"
      "  %r = relu(%c) : f32[16, 8]\n  %l = log_softmax(%r, 1) : f32[16, 8]\n"
      "  %n = nll_loss(%l, %t) : f32[]\n  return %r, %n\n}\n", "m.kir");
  std::vector<Tensor> host = on(Device{}, graph::seeded_inputs(g, 2));
  std::vector<Tensor> got = (*compile(g, cuda_compile()))(on(kCuda, host));
  CompareVerdict v = against_interpreter(g, host, got);
  EXPECT_TRUE(v.ok) << v.str();
}

TEST(CudaTensorsGpu, ReduceOverheadReplaysReadNewInputsAndLeaveEarlierOutputsAlone) {
  SKIP_WITHOUT_GPU();
  graph::Graph g = graph::parse_graph(kSoftmaxGraph, "s.kir");
  std::shared_ptr<CompiledGraph> c = compile(g, cuda_compile("reduce-overhead"));
  std::vector<Tensor> first_in = on(Device{}, graph::seeded_inputs(g, 1));
  std::vector<Tensor> first = (*c)(on(kCuda, first_in));
  std::vector<Tensor> expected_first = on(Device{}, first);
  for (uint64_t seed : {2, 3}) {
    std::vector<Tensor> in = on(Device{}, graph::seeded_inputs(g, seed));
    std::vector<Tensor> got = (*c)(on(kCuda, in));
    EXPECT_EQ(got[0].device(), kCuda);
    CompareVerdict v = against_interpreter(g, in, got);
    EXPECT_TRUE(v.ok) << "seed " << seed << ": " << v.str();
  }
  EXPECT_EQ(first[0].to_double_vector(), expected_first[0].to_double_vector()) << "a replay overwrote an output";
  std::vector<Tensor> host_out = (*c)(first_in);
  EXPECT_EQ(host_out[0].device(), Device{}) << "host inputs give host outputs";
  EXPECT_EQ(host_out[0].to_double_vector(), expected_first[0].to_double_vector());
}

// kiln::compile's mode reaches the backend: a captured function in reduce-overhead mode replays its graph as a
// CUDA graph and still gives eager's results on every call.
TEST(CudaTensorsGpu, CapturedFunctionsInReduceOverheadModeMatchEager) {
  SKIP_WITHOUT_GPU();
  auto fn = [](const Tensor& x) { return exp(x * 0.5) + x; };
  auto f = kiln::compile(fn, {.backend = "inductor_cuda", .mode = "reduce-overhead"});
  for (uint64_t seed : {1, 2, 3}) {
    Tensor host = graph::seeded_inputs(graph::parse_graph(
        "graph g(%x: f32[64, 32]) {\n  return %x\n}\n", "x.kir"), seed)[0];
    Tensor got = f(to_device(host, kCuda));
    EXPECT_EQ(got.device(), kCuda);
    Tensor expected = fn(host);
    std::vector<double> a = on(Device{}, {got})[0].to_double_vector(), b = expected.to_double_vector();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * (1 + std::abs(b[i]))) << "seed " << seed;
  }
}

TEST(CudaTensorsGpu, EagerOpsOnTheGpuRunThroughTheHostFallback) {
  SKIP_WITHOUT_GPU();
  Tensor a = reshape(arange(0, 12, 1, DType::F32), {3, 4}), b = reshape(arange(0, 8, 1, DType::F32), {4, 2});
  Tensor got = relu(add(matmul(to_device(a, kCuda), to_device(b, kCuda)), -20));
  EXPECT_EQ(got.device(), kCuda);
  EXPECT_EQ(got.to_double_vector(), relu(add(matmul(a, b), -20)).to_double_vector());
}

// rand, randn and philox_rand compiled for the GPU (extern calls: host fallbacks in the compiled program) and on
// CUDA tensors draw exactly the CPU eager run's numbers with the same seed, as do kernels computing on them.
TEST(CudaTensorsGpu, RandomOpsDrawTheCpusPhiloxNumbersBitForBit) {
  SKIP_WITHOUT_GPU();
  graph::Graph g = graph::parse_graph(
      "graph r(%x: f32[33, 65], %seed: i64[], %off: i64[]) {\n"
      "  %u = rand_like(%x) : f32[33, 65]\n  %n = randn([33, 65]) : f32[33, 65]\n"
      "  %p = philox_rand([33, 65], %seed, %off, \"uniform\") : f32[33, 65]\n"
      "  %q = philox_rand([33, 65], %seed, %off, \"normal\") : f32[33, 65]\n"
      "  %y = mul(%u, 2.0) : f32[33, 65]\n  %z = add(%x, %n) : f32[33, 65]\n"
      "  return %u, %n, %p, %q, %y, %z\n}\n", "r.kir");
  std::vector<Tensor> host = {graph::seeded_inputs(g, 4)[0], i64_word(1234), i64_word(77)};
  manual_seed(21);
  const std::vector<Tensor> expected = graph::run_graph(g, host);  // the CPU's eager kernels
  std::shared_ptr<CompiledGraph> c = compile(g, cuda_compile());
  for (bool device_inputs : {false, true}) {
    manual_seed(21);
    std::vector<Tensor> got = (*c)(device_inputs ? on(kCuda, host) : host);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(same_bits(to_device(got[i], Device{}), expected[i]))
          << "output " << i << (device_inputs ? " (CUDA inputs)" : " (host inputs)");
  }
  Tensor d = to_device(host[0], kCuda);
  manual_seed(21);
  Tensor eager_u = rand_like(d), eager_n = randn(IntList{33, 65});
  EXPECT_EQ(eager_u.device(), kCuda);
  EXPECT_TRUE(same_bits(to_device(eager_u, Device{}), expected[0])) << "rand_like of a CUDA tensor";
  EXPECT_TRUE(same_bits(eager_n, expected[1])) << "randn after it";
}

TEST(CudaTensorsGpu, FreedBlocksStayInTheirStreamsOrder) {
  SKIP_WITHOUT_GPU();
  const cuda::Driver& d = *cuda::driver();
  CUstream s = nullptr, t = nullptr;
  cuda::check(d.stream_create(&s, CU_STREAM_DEFAULT), "cuStreamCreate");
  cuda::check(d.stream_create(&t, CU_STREAM_DEFAULT), "cuStreamCreate");
  const size_t odd = 3 * 1000 * 1000 + 4096;  // a size no other test uses
  CUdeviceptr p = cuda::device_alloc(odd, s);
  cuda::device_free(p, odd, s);
  CUdeviceptr q = cuda::device_alloc(odd, t);
  EXPECT_NE(q, p) << "a block freed on one stream went to another before that stream's work ran";
  CUdeviceptr r = cuda::device_alloc(odd, s);
  EXPECT_EQ(r, p) << "the same stream reuses its block";
  cuda::device_free(q, odd, t);
  cuda::device_free(r, odd, nullptr);
  EXPECT_EQ(cuda::device_alloc(odd, t), r) << "a block freed on the null stream goes to any stream";
  d.stream_synchronize(s);
  d.stream_synchronize(t);
}

class CudaTensorsGpuCli : public cli_test::CliTest {};

TEST_F(CudaTensorsGpuCli, KilnRunChecksAGraphOfCudaValues) {
  SKIP_WITHOUT_GPU();
  const std::string kiln = cli_test::kiln_command();
  if (kiln.empty()) GTEST_SKIP() << "no kiln CLI: not at " << KILN_CLI << " and GPU_TEST_KILN is not set";
  const std::string g = file("c.kir", kCudaGraph);
  for (const char* args : {"", " --backend inductor_cuda", " --backend inductor_cuda --mode reduce-overhead"}) {
    cli_test::CliResult r = cli_test::shell(kiln + " run " + g + args + " --check --dump " + path("dump"));
    EXPECT_EQ(r.exit_code, 0) << args << ": " << r.output;
    EXPECT_NE(r.output.find("check against the fp64 reference: PASS"), std::string::npos) << args << ": " << r.output;
    EXPECT_TRUE(std::filesystem::exists(path("dump") + "/output_0.npy")) << args;
    std::filesystem::remove_all(path("dump"));
  }
}

}  // namespace
}  // namespace kiln
