// Graph inputs keep their layout through every tool: seeded and .npy inputs take the strides their graph
// input declares, and graph::copy_inputs (what each tool hands a backend and its reference) keeps them, so
// ops that read the storage itself (as_strided) agree between eager and compiled code (kiln fuzz found them
// disagreeing: tests/repros/as_strided_of_a_strided_input.repro).
#include <gtest/gtest.h>

#include <filesystem>

#include "api/backends.h"
#include "eager/npy.h"
#include "graph/compare.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "ops/api.h"

using namespace kiln;

namespace {

const char* kColumnMajorAsStrided = R"(graph main(%x: f32[2, 3]{1, 2}) {
  %y = as_strided(%x, [6], [1])
  %z = clone(%x)
  return %y, %z
})";

TEST(GraphInputs, CopiesKeepDenseLayoutsAndValues) {
  Tensor column_major = Tensor::empty_strided({2, 3}, {1, 2}, DType::F32);
  copy_(column_major, Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}));
  Tensor expanded = expand(Tensor::from_vector(std::vector<float>{7, 8, 9}, {1, 3}), {2, 3});
  std::vector<Tensor> copies = graph::copy_inputs({column_major, expanded});
  EXPECT_EQ(copies[0].strides(), (Shape{1, 2}));
  EXPECT_NE(copies[0].storage(), column_major.storage());
  EXPECT_EQ(copies[0].to_double_vector(), column_major.to_double_vector());
  EXPECT_EQ(copies[1].strides(), (Shape{3, 1}));  // stride 0 is not dense: a contiguous copy
  EXPECT_EQ(copies[1].to_double_vector(), expanded.to_double_vector());
}

TEST(GraphInputs, NpyInputsTakeTheDeclaredStrides) {
  graph::Graph g = graph::parse_graph(kColumnMajorAsStrided);
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "kiln_test_inputs_npy";
  std::filesystem::remove_all(dir);
  std::vector<Tensor> seeded = graph::seeded_inputs(g, 3);
  ASSERT_EQ(seeded[0].strides(), (Shape{1, 2}));
  graph::save_inputs(g, seeded, dir.string());
  std::vector<Tensor> loaded = graph::load_inputs(g, dir.string());
  EXPECT_EQ(loaded[0].strides(), (Shape{1, 2}));
  EXPECT_EQ(loaded[0].to_double_vector(), seeded[0].to_double_vector());
  std::filesystem::remove_all(dir);
}

// as_strided over a column-major input reads its storage in memory order (PyTorch's semantics), in eager and
// compiled code alike.
TEST(GraphInputs, AsStridedOfAStridedInputAgreesBetweenEagerAndInductor) {
  graph::Graph g = graph::parse_graph(kColumnMajorAsStrided);
  std::vector<Tensor> inputs = graph::seeded_inputs(g, 1);
  std::vector<Tensor> eager = graph::run_graph(g, graph::copy_inputs(inputs));
  std::vector<Tensor> compiled = find_backend("inductor")(g, graph::copy_inputs(inputs));
  std::vector<double> z = eager[1].to_double_vector();  // x in logical (row-major) order
  EXPECT_EQ(eager[0].to_double_vector(), (std::vector<double>{z[0], z[3], z[1], z[4], z[2], z[5]}));
  EXPECT_TRUE(compare_outputs(eager, compiled).ok) << compare_outputs(eager, compiled).str();
}

}  // namespace
