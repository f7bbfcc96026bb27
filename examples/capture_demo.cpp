// kiln::compile on a small model's forward (docs/capture.md): a data-dependent branch (a graph break),
// explain(), a recompile with its reason (KILN_LOGS=recompiles), and the speedup of the compiled forward
// over eager. Built by CMake as kiln-capture-demo; ci/demo.sh runs it.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <iostream>

#include "capture/capture.h"
#include "core/options.h"
#include "eager/philox.h"
#include "ops/api.h"

using namespace kiln;

namespace {

struct Mlp {
  Tensor w1, b1, w2, b2;
  Tensor forward(const Tensor& x) const {
    Tensor h = gelu(linear(x, w1, b1));
    // Data-dependent: a graph break (the value comes from the eager run, then the branch is cached).
    if (gt(mean(h), 0.5).is_nonzero()) h = h * 0.5;
    Tensor y = linear(h, w2, b2);
    return sigmoid(y) * tanh(y) + y * 0.1;
  }
};

double ms_per_call(const std::function<void()>& f, int reps) {
  f();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 200;  // timed calls (tests pass a few)
    manual_seed(0);
    Mlp model{randn({256, 128}) * 0.1, zeros({256}), randn({64, 256}) * 0.1, zeros({64})};
    auto forward = [&model](const Tensor& x) { return model.forward(x); };

    std::cout << "== explain(forward, x[32, 128])\n" << explain(forward, randn({32, 128})) << "\n";

    // No backend named: KILN_BACKEND's, else inductor (`KILN_BACKEND=eager build/kiln-capture-demo` ablates it).
    auto compiled = compile(forward, {.backend = "", .name = "forward", .arg_names = {"x"}});
    Tensor x = randn({32, 128});
    Tensor eager = forward(x);
    compiled(x);  // the first call traces (its results are eager results)
    Tensor got = compiled(x);  // a cached call: the compiled graphs
    double max_err = amax(abs(eager - got)).item().to_double();
    std::printf("compiled == eager: max abs error %.3g\n\n", max_err);

    std::cout << "== a call with another batch size recompiles (KILN_LOGS=recompiles)\n" << std::flush;
    {
      std::vector<std::string> channels = opt_list(Opt::Logs);  // whatever KILN_LOGS has, plus recompiles
      channels.push_back("recompiles");
      ScopedOption logs(Opt::Logs, fmt::format("{}", fmt::join(channels, ",")));
      compiled(randn({16, 128}));
    }
    std::cout << "recompiles: " << compiled.core().recompiles() << "\n\n";

    double eager_ms = ms_per_call([&] { forward(x); }, reps);
    double compiled_ms = ms_per_call([&] { compiled(x); }, reps);
    std::printf("== speed (x[32, 128], %d calls)\neager    %.3f ms/call\ncompiled %.3f ms/call\nspeedup  %.2fx\n",
                reps, eager_ms, compiled_ms, eager_ms / compiled_ms);
    return max_err < 1e-3 ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "capture_demo: %s\n", e.what());
    return 2;
  }
}
