// Small tensors and checks shared by the capture tests (test_capture*.cpp).
#pragma once
#include <gtest/gtest.h>

#include <vector>

#include "eager/tensor.h"

namespace kiln::capture_test {

// 1, 2, 3, ... (from `start`) in f32, shaped `sizes`.
inline Tensor iota(Shape sizes, double start = 1.0) {
  std::vector<float> v(size_t(shape_numel(sizes)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(start + double(i));
  return Tensor::from_vector(v, sizes);
}

// Same sizes and bit-identical values (through f64).
inline void expect_same(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.sizes(), b.sizes());
  EXPECT_EQ(a.to_double_vector(), b.to_double_vector());
}

}  // namespace kiln::capture_test
