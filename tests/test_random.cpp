// Tests of the Philox generator and the random ops: reproducibility keyed by (seed, offset), the known-answer
// vector of Philox4x32-10, and the distributions' first moments.
#include <gtest/gtest.h>

#include <cmath>

#include "eager/philox.h"
#include "ops/api.h"

using namespace kiln;

TEST(Philox, KnownAnswerVector) {
  // Random123's kat_vectors: philox4x32_10 with counter 0 and key 0.
  auto r = Philox4x32::draw(0, 0, 0);
  EXPECT_EQ(r[0], 0x6627e8d5u);
  EXPECT_EQ(r[1], 0xe169c58du);
  EXPECT_EQ(r[2], 0xbc57ac4cu);
  EXPECT_EQ(r[3], 0x9b00dbd8u);
}

TEST(Random, SameSeedSameNumbersAndOffsetAdvances) {
  manual_seed(42);
  Tensor a = rand({100});
  Tensor b = rand({100});
  EXPECT_EQ(default_generator().offset, 200u);
  manual_seed(42);
  EXPECT_EQ(rand({100}).to_double_vector(), a.to_double_vector());
  EXPECT_EQ(rand({100}).to_double_vector(), b.to_double_vector());
  EXPECT_NE(a.to_double_vector(), b.to_double_vector());
  // element i depends only on (seed, offset + i): a shape change does not change the stream
  manual_seed(42);
  EXPECT_EQ(rand({10, 10}).to_double_vector(), a.to_double_vector());
}

TEST(Random, DistributionsHaveTheRightMoments) {
  manual_seed(7);
  std::vector<double> u = rand({20000}, DType::F64).to_double_vector();
  std::vector<double> n = randn({20000}).to_double_vector();
  double mu = 0, mn = 0, vn = 0;
  for (double x : u) { mu += x; EXPECT_GE(x, 0.0); EXPECT_LT(x, 1.0); }
  for (double x : n) mn += x;
  mu /= double(u.size());
  mn /= double(n.size());
  for (double x : n) vn += (x - mn) * (x - mn);
  vn /= double(n.size());
  EXPECT_NEAR(mu, 0.5, 0.01);
  EXPECT_NEAR(mn, 0.0, 0.03);
  EXPECT_NEAR(vn, 1.0, 0.04);
  std::vector<double> k = randint(-3, 4, {5000}).to_double_vector();
  for (double x : k) { EXPECT_GE(x, -3); EXPECT_LT(x, 4); }
  Tensor b = bernoulli(zeros({4000}), 0.25);
  double mb = 0;
  for (double x : b.to_double_vector()) mb += x;
  EXPECT_NEAR(mb / 4000, 0.25, 0.03);
}

TEST(Random, BadArgumentsAreErrors) {
  EXPECT_THROW(randint(5, 5, {3}), Error);
  EXPECT_THROW(rand({-1}), Error);
  EXPECT_THROW(rand({2}, DType::I64), Error);
  EXPECT_THROW(bernoulli(full({2}, 1.5)), Error);
  EXPECT_THROW(bernoulli(zeros({2}), 2.0), Error);
}
