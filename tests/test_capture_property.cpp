// Capture properties: a compiled function equals eager (through the comparator) for random programs over
// the Tensor API with graph breaks (item, bool, disable) at random points, for the eager and inductor
// backends, on later calls with new values (replays and new branches) and new shapes (recompiles); and one
// compiled function called from several threads at once.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <thread>

#include "capture/capture.h"
#include "graph/compare.h"
#include "ops/api.h"

namespace kiln {
namespace {

enum class Instr : int { Relu, Tanh, Sigmoid, Neg, Add, Mul, Sub, Maximum, Scale, Center, AddInPlace, ItemBreak,
                         BoolBreak, DisableBreak, NumInstrs };

struct Program {
  std::vector<std::pair<Instr, int>> code;  // instruction, operand selector
  std::vector<double> constants;
};

// Runs the program on tensors a, b (kiln API calls; breaks where the program says).
Tensor run_program(const Program& p, const Tensor& a, const Tensor& b) {
  std::vector<Tensor> pool = {a, b};
  double scale = 1.0;
  for (size_t i = 0; i < p.code.size(); ++i) {
    auto [op, sel] = p.code[i];
    const Tensor& x = pool[size_t(sel) % pool.size()];
    const Tensor& y = pool[size_t(sel / 7 + 1) % pool.size()];
    double c = p.constants[i % p.constants.size()];
    switch (op) {
      case Instr::Relu: pool.push_back(relu(x)); break;
      case Instr::Tanh: pool.push_back(tanh(x)); break;
      case Instr::Sigmoid: pool.push_back(sigmoid(x)); break;
      case Instr::Neg: pool.push_back(neg(x)); break;
      case Instr::Add: pool.push_back(x + y); break;
      case Instr::Mul: pool.push_back(tanh(x * y)); break;
      case Instr::Sub: pool.push_back(x - y); break;
      case Instr::Maximum: pool.push_back(maximum(x, y)); break;
      case Instr::Scale: pool.push_back(x * (c * scale)); break;
      case Instr::Center: pool.push_back(x - mean(x)); break;
      case Instr::AddInPlace: {
        Tensor t = clone(x);
        add_(t, y, c);
        pool.push_back(t);
        break;
      }
      case Instr::ItemBreak: scale = 0.25 * double(sum(gt(x, 0.0)).item().to_int()); break;  // few values: replays
      // The branch reads a max, not a sum: a sum's last bits depend on the order of its additions (compiled
      // and eager may differ there, within tolerance), and a sum near 0 would then take either branch.
      case Instr::BoolBreak: pool.push_back(gt(amax(x), 0).is_nonzero() ? x * 2.0 : x + 1.0); break;
      case Instr::DisableBreak:
        pool.push_back(disable([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 0.5}; }, {x})[0]);
        break;
      default: break;
    }
  }
  return pool.back() + pool[pool.size() / 2];
}

Tensor random_tensor(const Shape& sizes) {
  std::vector<float> v = *rc::gen::container<std::vector<float>>(size_t(shape_numel(sizes)),
                                                                 rc::gen::map(rc::gen::inRange(-200, 200), [](int i) {
                                                                   return float(i) / 100.0f;
                                                                 }));
  return Tensor::from_vector(v, sizes);
}

void check_backend(const std::string& backend) {
  Program p;
  p.code = *rc::gen::container<std::vector<std::pair<Instr, int>>>(
      *rc::gen::inRange<size_t>(2, 12),
      rc::gen::pair(rc::gen::map(rc::gen::inRange(0, int(Instr::NumInstrs)), [](int i) { return Instr(i); }),
                    rc::gen::inRange(0, 50)));
  // At least one graph break, at a random point.
  Instr brk = *rc::gen::element(Instr::ItemBreak, Instr::BoolBreak, Instr::DisableBreak);
  size_t at = *rc::gen::inRange<size_t>(0, p.code.size() + 1);
  p.code.insert(p.code.begin() + std::ptrdiff_t(at), {brk, *rc::gen::inRange(0, 50)});
  p.constants = {*rc::gen::inRange(-20, 20) / 10.0, *rc::gen::inRange(-20, 20) / 10.0};
  auto f = compile([&p](const Tensor& a, const Tensor& b) { return run_program(p, a, b); }, {.backend = backend});
  // Same-shape calls replay (or take a new branch: input signs vary); the last shape recompiles.
  std::vector<Shape> shapes = {{4}, {4}, {4}, {4}, {4}, {4}, {2, 3}, {2, 3}};
  for (const Shape& shape : shapes) {
    Tensor a = random_tensor(shape), b = random_tensor(shape);
    Tensor expected = run_program(p, a, b);
    Tensor actual = f(a, b);
    CompareVerdict v = compare_outputs({expected}, {actual});
    RC_ASSERT(v.ok);
  }
}

RC_GTEST_PROP(CaptureProperty, CompiledEqualsEagerWithBreaksEagerBackend, ()) { check_backend("eager"); }
RC_GTEST_PROP(CaptureProperty, CompiledEqualsEagerWithBreaksInductorBackend, ()) { check_backend("inductor"); }

TEST(CaptureThreads, OneCompiledFunctionFromManyThreads) {
  auto f = compile(
      [](const Tensor& x) {
        Tensor y = relu(x) * 2.0;
        return gt(sum(y), 4.0).is_nonzero() ? y - 1.0 : y + 1.0;
      },
      {.backend = "inductor"});
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        int64_t n = 1 + (i + t) % 3;
        Tensor x = full({n}, double((i * 7 + t) % 5) - 1.0);
        Tensor y = relu(x) * 2.0;
        Tensor expected = gt(sum(y), 4.0).is_nonzero() ? y - 1.0 : y + 1.0;
        if (!compare_outputs({expected}, {f(x)}).ok) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(f.core().cache_entries(), 3);
}

}  // namespace
}  // namespace kiln
