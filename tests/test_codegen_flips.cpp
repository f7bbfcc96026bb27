// The code-generation options the bisector flips (docs/inductor.md, Debugging): KILN_OWN_EXP=0 replaces kiln's
// own f32 exp by libm's, KILN_VECTOR_WIDTH=1 makes scalar code and N asks for N lanes. Each changes the
// generated code (the LLVM IR, or the vector instructions of the optimised kernel in the cache log), each is
// part of the kernel cache key (a kernel built under one setting is not reused under another), and the results
// still match the fp64 reference (`kiln run --check` exits 0).
#include <gtest/gtest.h>

#include <regex>

#include "backends/cpu/vector_math.h"
#include "cli_run.h"

namespace kiln::cli_test {
namespace {

const char* const kExpKir = R"(graph e(%x: f32[64, 256]) {
  %a = exp(%x) : f32[64, 256]
  %y = mul(%a, 0.5) : f32[64, 256]
  return %y
}
)";

// Pointwise only: scalar code has no vector instruction at all (kiln's own scalar exp uses a 4-lane vscalefss).
const char* const kPointwiseKir = R"(graph p(%x: f32[64, 256]) {
  %a = mul(%x, 0.5) : f32[64, 256]
  %y = add(%a, %x) : f32[64, 256]
  return %y
}
)";

class CodegenFlips : public CliTest {
 protected:
  // `kiln run --backend inductor --check` with a fresh kernel cache per test and `env`; asserts exit 0.
  std::string run(const std::string& env, const char* kir = kExpKir) {
    CliResult r = kiln_cli("run " + file("g.kir", kir) + " --seed 0 --backend inductor --check",
                           "KILN_CACHE_DIR=" + path("cache") + " " + env);
    EXPECT_EQ(r.exit_code, 0) << env << "\n" << r.output;
    return r.output;
  }
  // The vector instructions of each kernel built in `output` (the cache log's "built" lines).
  static std::vector<int64_t> vector_counts(const std::string& output) {
    std::vector<int64_t> counts;
    std::regex built("built \\S+: .*; (\\d+) vector instructions");
    for (auto it = std::sregex_iterator(output.begin(), output.end(), built); it != std::sregex_iterator(); ++it)
      counts.push_back(std::stoll((*it)[1]));
    return counts;
  }
};

TEST_F(CodegenFlips, OwnExpOffCallsLibmInstead) {
  if (!runtime::has_fast_vector_math()) GTEST_SKIP() << "kiln's own exp needs AVX-512F and VL";
  EXPECT_NE(run("KILN_LOGS=output_code").find("@kiln_expf"), std::string::npos);
  std::string off = run("KILN_LOGS=output_code KILN_OWN_EXP=0");
  EXPECT_EQ(off.find("@kiln_expf"), std::string::npos) << off;
  EXPECT_NE(off.find("expf"), std::string::npos) << off;
}

TEST_F(CodegenFlips, VectorWidthOneMakesScalarCodeAndIsPartOfTheCacheKey) {
  std::vector<int64_t> vectorised = vector_counts(run("KILN_LOGS=cache", kPointwiseKir));
  ASSERT_EQ(vectorised.size(), 1u);
  EXPECT_GT(vectorised[0], 0);
  // Same cache directory: the scalar kernel is built afresh, not the vectorised one reused.
  std::vector<int64_t> scalar = vector_counts(run("KILN_LOGS=cache KILN_VECTOR_WIDTH=1", kPointwiseKir));
  ASSERT_EQ(scalar.size(), 1u) << "the kernel built with the vectoriser was reused";
  EXPECT_EQ(scalar[0], 0);
  std::vector<int64_t> four = vector_counts(run("KILN_LOGS=cache KILN_VECTOR_WIDTH=4", kPointwiseKir));
  ASSERT_EQ(four.size(), 1u);
  EXPECT_GT(four[0], 0);
  // A forced width builds other code than the vectoriser's own choice: at 4 or at 16 lanes, whichever the target's
  // choice is not (on an AVX2 machine 2, 4 and 8 lanes all come out as 24 instructions of this kernel, 16 as 48;
  // AVX-512 picks 16).
  std::vector<int64_t> sixteen = vector_counts(run("KILN_LOGS=cache KILN_VECTOR_WIDTH=16", kPointwiseKir));
  ASSERT_EQ(sixteen.size(), 1u);
  EXPECT_TRUE(four[0] != vectorised[0] || sixteen[0] != vectorised[0])
      << "4 and 16 lanes both built the same code as the vectoriser's own choice (" << vectorised[0] << " vector "
      << "instructions)";
}

TEST_F(CodegenFlips, VectorWidthOutOfRangeIsABadSetting) {
  CliResult r = kiln_cli("run " + file("e.kir", kExpKir) + " --backend inductor", "KILN_VECTOR_WIDTH=65");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("KILN_VECTOR_WIDTH"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kiln::cli_test
