// The ATen rows of `kiln import` that write one ATen op with several kiln ops (src/import/aten_ops.cpp,
// add_core_compositions): each is imported from a one-node archive built here, run on eager and on the
// inductor, and compared with the op's definition computed in the test; a row that cannot honour its
// arguments refuses with exit 2 naming the node.
#include <gtest/gtest.h>
#include <zip.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "eager/npy.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using kiln::cli_test::CliResult;
using kiln::cli_test::kiln_cli;

namespace {

json meta(int dtype, const std::vector<int64_t>& sizes) {
  json s = json::array();
  for (int64_t v : sizes) s.push_back({{"as_int", v}});
  return {{"dtype", dtype}, {"sizes", s}};
}

struct Input {
  std::string name;
  kiln::Tensor value;
};

// A one-node ExportedProgram: user inputs `inputs`, node `target` with `args` (name -> Argument union),
// outputs named y0, y1, ... with the recorded metas `outs`.
std::string one_node_program(const std::string& target, const std::vector<Input>& inputs, const json& args,
                             const std::vector<json>& outs) {
  json tensor_values = json::object(), input_specs = json::array(), node_inputs = json::array();
  for (const Input& in : inputs) {
    int dtype = in.value.dtype() == kiln::DType::I64 ? 5 : in.value.dtype() == kiln::DType::Bool ? 12 : 7;
    tensor_values[in.name] = meta(dtype, in.value.sizes());
    input_specs.push_back({{"user_input", {{"arg", {{"as_tensor", {{"name", in.name}}}}}}}});
  }
  for (const auto& [name, arg] : args.items()) node_inputs.push_back({{"name", name}, {"arg", arg}, {"kind", 1}});
  json node_outputs = json::array(), output_specs = json::array();
  for (size_t k = 0; k < outs.size(); ++k) {
    std::string name = "y" + std::to_string(k);
    tensor_values[name] = outs[k];
    node_outputs.push_back({{"as_tensor", {{"name", name}}}});
    output_specs.push_back({{"user_output", {{"arg", {{"as_tensor", {{"name", name}}}}}}}});
  }
  json node = {{"target", target}, {"inputs", node_inputs}, {"outputs", node_outputs}, {"metadata", json::object()}};
  json program = {{"schema_version", {{"major", 8}, {"minor", 17}}},
                  {"graph_module", {{"graph", {{"nodes", {node}}, {"tensor_values", tensor_values}}},
                                    {"signature", {{"input_specs", input_specs}, {"output_specs", output_specs}}}}}};
  return program.dump();
}

json tensor_arg(const std::string& name) { return {{"as_tensor", {{"name", name}}}}; }

class ImportOps : public kiln::cli_test::CliTest {
 protected:
  // Imports the one-node archive, runs it on `backend` with `inputs`, returns the outputs (empty on failure).
  CliResult import_one(const std::string& target, const std::vector<Input>& inputs, const json& args,
                       const std::vector<json>& outs) {
    const fs::path archive = dir_ / "one.pt2";
    fs::remove(archive);
    fs::remove_all(dir_ / "out");
    zipFile z = zipOpen64(archive.c_str(), 0);
    zip_fileinfo info{};
    std::string text = one_node_program(target, inputs, args, outs);
    zipOpenNewFileInZip64(z, "one/models/model.json", &info, nullptr, 0, nullptr, 0, nullptr, 0, 0, 1);
    zipWriteInFileInZip(z, text.data(), unsigned(text.size()));
    zipCloseFileInZip(z);
    zipClose(z, nullptr);
    CliResult r = kiln_cli("import '" + archive.string() + "' -o '" + path("out") + "'");
    for (const Input& in : inputs)
      if (r.exit_code == 0) kiln::write_npy(path("out/" + in.name + ".npy"), in.value);
    return r;
  }
  std::vector<kiln::Tensor> run(const std::string& backend, size_t outputs) {
    fs::remove_all(dir_ / "dump");
    CliResult r = kiln_cli("run '" + path("out/one.kir") + "' --inputs '" + path("out") + "' --backend " + backend +
                           " --dump '" + path("dump") + "'");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::vector<kiln::Tensor> out;
    for (size_t k = 0; k < outputs && r.exit_code == 0; ++k)
      out.push_back(kiln::read_npy(path("dump/output_" + std::to_string(k) + ".npy")));
    return out;
  }
  // A unary float op: y = f(x) elementwise on `values`, both backends.
  void expect_unary(const std::string& target, const std::vector<float>& values, const json& extra,
                    const std::function<double(double)>& f) {
    SCOPED_TRACE(target);
    kiln::Tensor x = kiln::Tensor::from_vector<float>(values, {int64_t(values.size())});
    json args = extra;
    args["self"] = tensor_arg("x");
    CliResult r = import_one(target, {{"x", x}}, args, {meta(7, {int64_t(values.size())})});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const std::string backend : {"eager", "inductor"}) {
      std::vector<kiln::Tensor> y = run(backend, 1);
      ASSERT_EQ(y.size(), 1u);
      for (size_t i = 0; i < values.size(); ++i)
        EXPECT_NEAR(y[0].data<float>()[i], f(values[i]), 1e-5 + 1e-5 * std::fabs(f(values[i])))
            << backend << " x=" << values[i];
    }
  }
};

TEST_F(ImportOps, PointwiseCompositionsComputeTheirDefinitions) {
  const std::vector<float> mixed = {-3.0f, -0.5f, 0.0f, 0.25f, 2.0f};
  expect_unary("torch.ops.aten.leaky_relu.default", mixed, {{"negative_slope", {{"as_float", 0.2}}}},
               [](double x) { return x > 0 ? x : 0.2 * x; });
  expect_unary("torch.ops.aten.elu.default", mixed, {{"alpha", {{"as_float", 1.5}}}},
               [](double x) { return x > 0 ? x : 1.5 * std::expm1(x); });
  expect_unary("torch.ops.aten.hardtanh.default", mixed, {{"min_val", {{"as_float", -1.0}}}, {"max_val", {{"as_float", 0.5}}}},
               [](double x) { return std::min(0.5, std::max(-1.0, x)); });
  expect_unary("torch.ops.aten.asinh.default", mixed, json::object(), [](double x) { return std::asinh(x); });
  expect_unary("torch.ops.aten.acosh.default", {1.0f, 1.5f, 4.0f}, json::object(), [](double x) { return std::acosh(x); });
  expect_unary("torch.ops.aten.atanh.default", {-0.9f, -0.1f, 0.0f, 0.5f}, json::object(),
               [](double x) { return std::atanh(x); });
  expect_unary("torch.ops.aten.log10.default", {0.001f, 1.0f, 50.0f}, json::object(), [](double x) { return std::log10(x); });
}

TEST_F(ImportOps, ClampWithTensorBoundsAndBitwiseNot) {
  kiln::Tensor x = kiln::Tensor::from_vector<float>({-2, 0, 2, 5}, {4});
  kiln::Tensor lo = kiln::Tensor::from_vector<float>({-1, 1, -1, 1}, {4});
  kiln::Tensor hi = kiln::Tensor::from_vector<float>({0, 3, 1, 4}, {4});
  CliResult r = import_one("torch.ops.aten.clamp.Tensor", {{"x", x}, {"lo", lo}, {"hi", hi}},
                           {{"self", tensor_arg("x")}, {"min", tensor_arg("lo")}, {"max", tensor_arg("hi")}},
                           {meta(7, {4})});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const std::string backend : {"eager", "inductor"}) {
    std::vector<kiln::Tensor> y = run(backend, 1);
    ASSERT_EQ(y.size(), 1u);
    EXPECT_EQ(std::vector<float>(y[0].data<float>(), y[0].data<float>() + 4), (std::vector<float>{-1, 1, 1, 4})) << backend;
  }
  kiln::Tensor i = kiln::Tensor::from_vector<int64_t>({0, 5, -7}, {3});
  r = import_one("torch.ops.aten.bitwise_not.default", {{"i", i}}, {{"self", tensor_arg("i")}}, {meta(5, {3})});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<kiln::Tensor> y = run("inductor", 1);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(std::vector<int64_t>(y[0].data<int64_t>(), y[0].data<int64_t>() + 3), (std::vector<int64_t>{-1, -6, 6}));
}

TEST_F(ImportOps, MaxDimGivesValuesAndIndicesAndVarDimItsCorrection) {
  kiln::Tensor x = kiln::Tensor::from_vector<float>({1, 7, 3, 9, 2, 4}, {2, 3});
  CliResult r = import_one("torch.ops.aten.max.dim", {{"x", x}}, {{"self", tensor_arg("x")}, {"dim", {{"as_int", 1}}}},
                           {meta(7, {2}), meta(5, {2})});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<kiln::Tensor> y = run("inductor", 2);
  ASSERT_EQ(y.size(), 2u);
  EXPECT_EQ(std::vector<float>(y[0].data<float>(), y[0].data<float>() + 2), (std::vector<float>{7, 9}));
  EXPECT_EQ(std::vector<int64_t>(y[1].data<int64_t>(), y[1].data<int64_t>() + 2), (std::vector<int64_t>{1, 0}));
  r = import_one("torch.ops.aten.var.dim", {{"x", x}},
                 {{"self", tensor_arg("x")}, {"dim", {{"as_ints", {1}}}}, {"unbiased", {{"as_bool", false}}}},
                 {meta(7, {2})});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  y = run("eager", 1);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_NEAR(y[0].data<float>()[0], 56.0 / 9.0, 1e-5);  // mean 11/3 of {1, 7, 3}: ((8/3)^2 + (10/3)^2 + (2/3)^2) / 3
}

TEST_F(ImportOps, AdaptiveAvgPoolWhereTheOutputDividesTheInputElseANamedRefusal) {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[size_t(i)] = float(i);
  kiln::Tensor x = kiln::Tensor::from_vector<float>(v, {1, 1, 4, 4});
  CliResult r = import_one("torch.ops.aten._adaptive_avg_pool2d.default", {{"x", x}},
                           {{"self", tensor_arg("x")}, {"output_size", {{"as_ints", {2, 2}}}}}, {meta(7, {1, 1, 2, 2})});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<kiln::Tensor> y = run("inductor", 1);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(std::vector<float>(y[0].data<float>(), y[0].data<float>() + 4), (std::vector<float>{2.5, 4.5, 10.5, 12.5}));
  r = import_one("torch.ops.aten._adaptive_avg_pool2d.default", {{"x", x}},
                 {{"self", tensor_arg("x")}, {"output_size", {{"as_ints", {3, 3}}}}}, {meta(7, {1, 1, 3, 3})});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("node %y0 (aten._adaptive_avg_pool2d.default): output "
                          "size 3 does not divide input size 4"), std::string::npos) << r.output;
}

TEST_F(ImportOps, FmodFollowsTheSignOfTheDividend) {
  expect_unary("torch.ops.aten.fmod.Scalar", {-7.5f, -1.0f, 0.0f, 2.5f, 7.0f}, {{"other", {{"as_float", 2.0}}}},
               [](double x) { return std::fmod(x, 2.0); });
}

TEST_F(ImportOps, GroupNormNormalisesEachGroupThenAppliesTheChannelAffine) {
  // N=1, C=4, 1x2 spatial, 2 groups: group 0 = channels 0-1 = {0, 1, 2, 3}, group 1 = {10, 10, 10, 14}.
  kiln::Tensor x = kiln::Tensor::from_vector<float>({0, 1, 2, 3, 10, 10, 10, 14}, {1, 4, 1, 2});
  kiln::Tensor w = kiln::Tensor::from_vector<float>({1, 2, 1, 1}, {4});
  kiln::Tensor b = kiln::Tensor::from_vector<float>({0, 0, 0, 1}, {4});
  json args = {{"input", tensor_arg("x")}, {"weight", tensor_arg("w")}, {"bias", tensor_arg("b")},
               {"N", {{"as_int", 1}}}, {"C", {{"as_int", 4}}}, {"HxW", {{"as_int", 2}}}, {"group", {{"as_int", 2}}},
               {"eps", {{"as_float", 0.0}}}};
  CliResult r = import_one("torch.ops.aten.native_group_norm.default", {{"x", x}, {"w", w}, {"b", b}}, args,
                           {meta(7, {1, 4, 1, 2}), meta(7, {1, 2}), meta(7, {1, 2})});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const double s0 = std::sqrt(1.25), s1 = std::sqrt(3.0);  // population std of each group
  const std::vector<double> want = {-1.5 / s0, -0.5 / s0, 2 * 0.5 / s0, 2 * 1.5 / s0, -1 / s1, -1 / s1, -1 / s1 + 1, 3 / s1 + 1};
  for (const std::string backend : {"eager", "inductor"}) {
    std::vector<kiln::Tensor> y = run(backend, 3);
    ASSERT_EQ(y.size(), 3u);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(y[0].data<float>()[i], want[i], 1e-5) << backend << " " << i;
    EXPECT_NEAR(y[1].data<float>()[1], 11.0, 1e-5);
    EXPECT_NEAR(y[2].data<float>()[0], 1 / s0, 1e-5);
  }
}

TEST_F(ImportOps, CopyScatterValueFillAndReflectionPad) {
  kiln::Tensor x = kiln::Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  kiln::Tensor row = kiln::Tensor::from_vector<int64_t>({7, 8, 9}, {3});
  CliResult r = import_one("torch.ops.aten.copy.default", {{"x", x}, {"row", row}},
                           {{"self", tensor_arg("x")}, {"src", tensor_arg("row")}}, {meta(7, {2, 3})});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<kiln::Tensor> y = run("inductor", 1);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(std::vector<float>(y[0].data<float>(), y[0].data<float>() + 6), (std::vector<float>{7, 8, 9, 7, 8, 9}));

  kiln::Tensor index = kiln::Tensor::from_vector<int64_t>({2, 0}, {2, 1});
  r = import_one("torch.ops.aten.scatter.value", {{"x", x}, {"index", index}},
                 {{"self", tensor_arg("x")}, {"dim", {{"as_int", 1}}}, {"index", tensor_arg("index")},
                  {"value", {{"as_float", -1.0}}}}, {meta(7, {2, 3})});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  y = run("eager", 1);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(std::vector<float>(y[0].data<float>(), y[0].data<float>() + 6), (std::vector<float>{1, 2, -1, -1, 5, 6}));

  r = import_one("torch.ops.aten.fill.Scalar", {{"x", x}}, {{"self", tensor_arg("x")}, {"value", {{"as_float", 0.5}}}},
                 {meta(7, {2, 3})});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  y = run("inductor", 1);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(y[0].data<float>()[5], 0.5f);

  kiln::Tensor seq = kiln::Tensor::from_vector<float>({1, 2, 3}, {1, 1, 3});
  r = import_one("torch.ops.aten.reflection_pad1d.default", {{"seq", seq}},
                 {{"self", tensor_arg("seq")}, {"padding", {{"as_ints", {2, 1}}}}}, {meta(7, {1, 1, 6})});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  y = run("inductor", 1);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(std::vector<float>(y[0].data<float>(), y[0].data<float>() + 6), (std::vector<float>{3, 2, 1, 2, 3, 2}));
}

}  // namespace

namespace {

std::vector<float> floats_of(const kiln::Tensor& t) { return {t.data<float>(), t.data<float>() + t.numel()}; }
std::vector<int64_t> ints_of(const kiln::Tensor& t) { return {t.data<int64_t>(), t.data<int64_t>() + t.numel()}; }

}  // namespace

TEST_F(ImportOps, SortAndTopkAreAStableArgsortAndGather) {
  kiln::Tensor x = kiln::Tensor::from_vector<float>({3, 1, 2, 1}, {4});
  CliResult r = import_one("torch.ops.aten.sort.default", {{"x", x}},
                           {{"self", tensor_arg("x")}, {"descending", {{"as_bool", true}}}}, {meta(7, {4}), meta(5, {4})});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const std::string backend : {"eager", "inductor"}) {
    std::vector<kiln::Tensor> y = run(backend, 2);
    ASSERT_EQ(y.size(), 2u);
    EXPECT_EQ(floats_of(y[0]), (std::vector<float>{3, 2, 1, 1})) << backend;
    EXPECT_EQ(ints_of(y[1]), (std::vector<int64_t>{0, 2, 1, 3})) << backend;  // equal values keep their order
  }
  r = import_one("torch.ops.aten.topk.default", {{"x", x}},
                 {{"self", tensor_arg("x")}, {"k", {{"as_int", 2}}}, {"largest", {{"as_bool", false}}}},
                 {meta(7, {2}), meta(5, {2})});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<kiln::Tensor> y = run("inductor", 2);
  ASSERT_EQ(y.size(), 2u);
  EXPECT_EQ(floats_of(y[0]), (std::vector<float>{1, 1}));
  EXPECT_EQ(ints_of(y[1]), (std::vector<int64_t>{1, 3}));
  r = import_one("torch.ops.aten.topk.default", {{"x", x}}, {{"self", tensor_arg("x")}, {"k", {{"as_int", 5}}}},
                 {meta(7, {5}), meta(5, {5})});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("k (5) is out of range for dim -1 of size 4"), std::string::npos) << r.output;
}

TEST_F(ImportOps, UpsampleVecTakesTheScaleFactorsAsATenDoes) {
  kiln::Tensor x = kiln::Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  // H: 2 * 2.0 = 4 rows (0, 0, 1, 1); W: 2 * 1.5 = 3 columns read at floor(o / 1.5) = 0, 0, 1.
  CliResult r = import_one("torch.ops.aten.upsample_nearest2d.vec", {{"x", x}},
                           {{"input", tensor_arg("x")}, {"output_size", {{"as_none", true}}},
                            {"scale_factors", {{"as_floats", {2.0, 1.5}}}}},
                           {meta(7, {1, 1, 4, 3})});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const std::string backend : {"eager", "inductor"}) {
    std::vector<kiln::Tensor> y = run(backend, 1);
    ASSERT_EQ(y.size(), 1u);
    EXPECT_EQ(floats_of(y[0]), (std::vector<float>{1, 1, 2, 1, 1, 2, 3, 3, 4, 3, 3, 4})) << backend;
  }
  r = import_one("torch.ops.aten.upsample_bilinear2d.vec", {{"x", x}},
                 {{"input", tensor_arg("x")}, {"output_size", {{"as_ints", {1, 1}}}}, {"align_corners", {{"as_bool", true}}},
                  {"scale_factors", {{"as_none", true}}}},
                 {meta(7, {1, 1, 1, 1})});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<kiln::Tensor> y = run("inductor", 1);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(floats_of(y[0]), (std::vector<float>{1}));  // align_corners to 1x1 reads the corner
}

TEST_F(ImportOps, TransposedConvolutionOfTheExportIRSpreadsByTheStride) {
  // Every input pixel stamps the 2x2 kernel of ones on its own 2x2 block of the output (stride 2).
  kiln::Tensor x = kiln::Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  kiln::Tensor w = kiln::Tensor::from_vector<float>({1, 1, 1, 1}, {1, 1, 2, 2});
  CliResult r = import_one("torch.ops.aten.conv_transpose2d.input", {{"x", x}, {"w", w}},
                           {{"input", tensor_arg("x")}, {"weight", tensor_arg("w")}, {"stride", {{"as_ints", {2, 2}}}}},
                           {meta(7, {1, 1, 4, 4})});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const std::string backend : {"eager", "inductor"}) {
    std::vector<kiln::Tensor> y = run(backend, 1);
    ASSERT_EQ(y.size(), 1u);
    EXPECT_EQ(floats_of(y[0]), (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4})) << backend;
  }
}

TEST_F(ImportOps, NonFiniteFloatsAreReadAsTorchExportWritesThem) {
  // torch/_export/serde writes inf and nan as strings (scaled_dot_product_attention's causal mask has -inf).
  CliResult r = import_one("torch.ops.aten.full.default", {},
                           {{"size", {{"as_ints", {3}}}}, {"fill_value", {{"as_float", "-Infinity"}}}}, {meta(7, {3})});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<kiln::Tensor> y = run("eager", 1);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(floats_of(y[0]), (std::vector<float>(3, -INFINITY)));
  r = import_one("torch.ops.aten.full.default", {}, {{"size", {{"as_ints", {3}}}}, {"fill_value", {{"as_float", "lots"}}}},
                 {meta(7, {3})});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("does not follow torch.export's schema"), std::string::npos) << r.output;
}

// The rows of src/import/aten_core_gaps.cpp are checked against PyTorch by the scatter_ops, pool3d and bag_ops
// fixtures (test_import.cpp); here what a fixture cannot show: randperm's values and the named refusals.
TEST_F(ImportOps, RandpermIsAPermutationAndSelectScatterTakesANegativeIndex) {
  CliResult r = import_one("torch.ops.aten.randperm.default", {}, {{"n", {{"as_int", 6}}}}, {meta(5, {6})});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const std::string backend : {"eager", "inductor"}) {
    std::vector<kiln::Tensor> y = run(backend, 1);
    ASSERT_EQ(y.size(), 1u);
    std::vector<int64_t> v = ints_of(y[0]);
    std::sort(v.begin(), v.end());
    EXPECT_EQ(v, (std::vector<int64_t>{0, 1, 2, 3, 4, 5})) << backend;
  }
  kiln::Tensor x = kiln::Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  kiln::Tensor src = kiln::Tensor::from_vector<float>({-1, -2}, {2});
  r = import_one("torch.ops.aten.select_scatter.default", {{"x", x}, {"src", src}},
                 {{"self", tensor_arg("x")}, {"src", tensor_arg("src")}, {"dim", {{"as_int", 1}}}, {"index", {{"as_int", -1}}}},
                 {meta(7, {2, 3})});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<kiln::Tensor> y = run("inductor", 1);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(floats_of(y[0]), (std::vector<float>{1, 2, -1, 4, 5, -2}));
}

TEST_F(ImportOps, ScatterReduceMaxBicubicSamplingAndAMisfitSliceAreNamedRefusals) {
  kiln::Tensor x = kiln::Tensor::from_vector<float>({1, 2, 3}, {3});
  kiln::Tensor index = kiln::Tensor::from_vector<int64_t>({0, 0, 2}, {3});
  CliResult r = import_one("torch.ops.aten.scatter_reduce.two", {{"x", x}, {"index", index}},
                           {{"self", tensor_arg("x")}, {"dim", {{"as_int", 0}}}, {"index", tensor_arg("index")},
                            {"src", tensor_arg("x")}, {"reduce", {{"as_string", "amax"}}}}, {meta(7, {3})});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("(aten.scatter_reduce.two): reduce='amax' is not supported"), std::string::npos) << r.output;
  kiln::Tensor img = kiln::Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  kiln::Tensor grid = kiln::Tensor::from_vector<float>({0, 0}, {1, 1, 1, 2});
  r = import_one("torch.ops.aten.grid_sampler_2d.default", {{"img", img}, {"grid", grid}},
                 {{"input", tensor_arg("img")}, {"grid", tensor_arg("grid")}, {"interpolation_mode", {{"as_int", 2}}},
                  {"padding_mode", {{"as_int", 0}}}, {"align_corners", {{"as_bool", false}}}}, {meta(7, {1, 1, 1, 1})});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("interpolation_mode 'bicubic' is not supported"), std::string::npos) << r.output;
  r = import_one("torch.ops.aten.slice_scatter.default", {{"x", x}, {"src", x}},
                 {{"self", tensor_arg("x")}, {"src", tensor_arg("src")}, {"start", {{"as_int", 1}}}}, {meta(7, {3})});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("src has 3 elements along dim 0 where the slice [1:3:1] has 2"), std::string::npos) << r.output;
}
