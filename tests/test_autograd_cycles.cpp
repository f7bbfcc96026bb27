// Autograd histories free themselves: once the user's last handle to a tensor is gone, its history (backward
// nodes, saved tensors, view bases) is freed too, in every shape of history that used to form a reference
// cycle (in-place writes through views, in-place ops reading their own target, decompositions). Checked with
// weak pointers, so a leak fails here and not only under LeakSanitizer (ci/test.sh --sanitize).
#include <gtest/gtest.h>

#include <memory>

#include "autograd/autograd.h"
#include "ops/api.h"

using namespace kiln;

namespace {

// Weak handles to a tensor, its backward node and its view base: all must expire once the tensor is gone.
struct Watch {
  explicit Watch(const Tensor& t)
      : impl(t.impl_ptr()), node(t.grad_fn()), base(t.impl()->view_base) {}
  bool expired() const { return impl.expired() && node.expired() && base.expired(); }
  std::weak_ptr<TensorImpl> impl;
  std::weak_ptr<Node> node;
  std::weak_ptr<TensorImpl> base;
};

Tensor leaf(std::vector<int64_t> sizes) { return randn(sizes).set_requires_grad(true); }

}  // namespace

TEST(AutogradCycles, InPlaceThroughAViewReadingItsBase) {
  for (bool backward : {false, true}) {
    Tensor x = leaf({4, 3});
    std::vector<Watch> watches;
    {
      Tensor a = mul(x, 2.0);
      Tensor v = view(a, {4, 3});
      add_(v, a);  // the in-place op saves its base as an input, and the base's history becomes the op's
      watches = {Watch(a), Watch(v)};
      if (backward) sum(a).backward();
    }
    for (const Watch& w : watches) EXPECT_TRUE(w.expired()) << (backward ? "after" : "without") << " backward";
  }
}

TEST(AutogradCycles, InPlaceThroughASliceWithoutBackward) {
  Tensor x = leaf({4, 3});
  std::vector<Watch> watches;
  {
    Tensor a = mul(x, 2.0);
    Tensor v = narrow(a, 0, 1, 2);
    mul_(v, narrow(a, 0, 3, 1));  // reads another row of the same storage (no overlap: PyTorch refuses one)
    add_(v, 1.0);
    watches = {Watch(a), Watch(v)};
  }
  for (const Watch& w : watches) EXPECT_TRUE(w.expired());
}

TEST(AutogradCycles, InPlaceOpReadingItsOwnTarget) {
  for (bool backward : {false, true}) {
    Tensor x = leaf({3});
    std::vector<Watch> watches;
    {
      Tensor a = mul(x, 2.0);
      mul_(a, a);
      watches = {Watch(a)};
      if (backward) sum(a).backward();
    }
    for (const Watch& w : watches) EXPECT_TRUE(w.expired()) << (backward ? "after" : "without") << " backward";
  }
}

// A differentiable backward (create_graph) still sees the saved inputs' histories: the second derivative of
// sum(x^3) is 6x, through the saved x of each mul.
TEST(AutogradCycles, SavedInputsKeepTheirHistoryForCreateGraph) {
  Tensor x = Tensor::from_vector<double>({1, 2, 3}, {3}).set_requires_grad(true);
  Tensor y = mul(mul(x, 1.0), mul(mul(x, 1.0), mul(x, 1.0)));  // inputs with history, not the leaf itself
  Tensor g = kiln::grad({sum(y)}, {x}, {}, false, true)[0];
  EXPECT_EQ(g.to_double_vector(), (std::vector<double>{3, 12, 27}));
  Tensor gg = kiln::grad({sum(g)}, {x})[0];
  EXPECT_EQ(gg.to_double_vector(), (std::vector<double>{6, 12, 18}));
}
