// The bisector's generated test graphs (testing.h).
#include "bisect/testing.h"

#include <fmt/format.h>

#include "core/error.h"

namespace kiln::bisect {

const std::vector<std::string>& injection_kinds() {
  static const std::vector<std::string> k = {"lowering", "decomposition", "fusion"};
  return k;
}

InjectedGraph injected_chain(const std::string& kind, int nodes) {
  KILN_CHECK(kind == "lowering" || kind == "decomposition" || kind == "fusion",
             "unknown injection kind '{}' (lowering, decomposition, fusion)", kind);
  KILN_CHECK(nodes >= 4, "an injected chain needs at least 4 nodes, not {}", nodes);
  static const char* const kSteps[] = {"sin(%{})", "mul(%{}, 0.5)", "add(%{}, %x)", "tanh(%{})",
                                       "neg(%{})", "sigmoid(%{})", "cos(%{})"};
  InjectedGraph out;
  std::string body;
  std::string prev = "x";
  const int middle = nodes / 2;
  const char* shape = "f32[16, 16]";
  for (int i = 0; i < nodes; ++i) {
    std::string name = fmt::format("t{}", i);
    if (i == middle && kind == "lowering") {
      body += fmt::format("  %{} = relu(%{}) : {}\n", name, prev, shape);
      out = {"", "relu:accuracy", "inductor:lowering", name, name};
    } else if (i == middle && kind == "decomposition") {
      body += fmt::format("  %{}_var = var(%{}, [1]) : f32[16]\n  %{} = add(%{}, %{}_var) : {}\n", name, prev, name,
                          prev, name, shape);
      out = {"", "var:decomposition", "inductor:decomposition", name + "_var", name + "_var"};
    } else if (i == middle && kind == "fusion") {
      body += fmt::format("  %{}_sum = sum(%{}, [1], True) : f32[16, 1]\n  %{}_flip = flip(%{}_sum, [0]) : f32[16, 1]\n"
                          "  %{} = add(%{}, %{}_flip) : {}\n", name, prev, name, name, name, prev, name, shape);
      // The add (an output) is the loop fused into the sum's kernel; the flip, realised when the bisector
      // narrows inside the kernel, is the first value read from the unwritten rows.
      out = {"", "fusion:accuracy", "inductor:fusion", name, name + "_flip"};
    } else {
      body += fmt::format("  %{} = {} : {}\n", name, fmt::format(fmt::runtime(kSteps[i % 7]), prev), shape);
    }
    prev = name;
  }
  const std::string wrong = kind == "decomposition" ? fmt::format("t{}", middle) : out.site_value;
  out.kir = fmt::format("# {} op nodes, KILN_INJECT={} at the middle (bisect/testing.h)\ngraph chain(%x: {}) {{\n{}  "
                        "return %{}, %{}\n}}\n", nodes, out.inject, shape, body, prev, wrong);
  return out;
}

const std::vector<std::string>& training_injection_kinds() {
  static const std::vector<std::string> k = {"vjp", "partition"};
  return k;
}

InjectedGraph injected_training_chain(const std::string& kind, int nodes) {
  KILN_CHECK(kind == "vjp" || kind == "partition", "unknown training injection kind '{}' (vjp, partition)", kind);
  // The lowering chain's steps with the relu made an exp (vjp) or a sin (partition: no injected op).
  InjectedGraph out = injected_chain("lowering", nodes);
  const std::string relu = fmt::format("%{} = relu(", out.site_value);
  out.kir.replace(out.kir.find(relu), relu.size(), fmt::format("%{} = {}(", out.site_value, kind == "vjp" ? "exp" : "sin"));
  out.kir.replace(out.kir.find("(%x: f32[16, 16])"), 17, "(%x: f32[16, 16] grad)");
  out.kir.replace(out.kir.find("KILN_INJECT=relu:accuracy"), 25, "a training bug");
  const int line = 3 + nodes / 2;  // the comment, the graph's line, then one line per node
  if (kind == "vjp") out = {out.kir, "exp:vjp", "", "aot_eager", fmt::format("(line {}:", line)};
  else out = {out.kir, "partition:accuracy", "", "aot_eager_decomp_partition", "_injected = add"};
  // min-cut recomputes the chain from its start, so its first recomputed value (the wrong one) is %t0; %t3 =
  // tanh(...) is an output too, so its VJP, which reads the value recomputed from %t0, weighs in the gradient
  // (through a long chain of contracting ops the +1 is forgotten).
  if (kind == "partition" && nodes / 2 != 3) out.kir.replace(out.kir.rfind("\n}\n"), 3, ", %t3\n}\n");
  return out;
}

}  // namespace kiln::bisect
