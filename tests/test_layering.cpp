// Keeps src/ layered (docs/architecture.md, Layout): scans every #include "folder/..." line under src/ and
// fails when a folder includes one it does not depend on, e.g. src/eager including src/ops (the cycle
// eager <-> ops that the autograd hook in ops/dispatch.h broke). The allowed edges live in one table below.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "cli_run.h"
#include "core/error.h"
#include "ops/api.h"
#include "ops/dispatch.h"

namespace fs = std::filesystem;

namespace {

// Each folder of src/ (src/backends/* counts as "backends") and the folders it depends on directly; it may
// include those and, transitively, what they depend on. Lower layers first.
const std::map<std::string, std::set<std::string>> kLayerDeps = {
    {"core", {}},                       // types, errors, options, log, hash, pure scalar math
    {"eager", {"core"}},                // Tensor, storage, loops, reduce, philox
    {"ops", {"eager"}},                 // the op table, the dispatcher, the eager kernels
    {"autograd", {"ops"}},              // the engine (installs the dispatcher's AutogradHook), gradcheck
    {"graph", {"ops"}},                 // IR, .kir, verifier, interpreter, passes
    {"inductor", {"graph"}},            // target-neutral lowering and scheduling
    {"import", {"graph"}},              // kiln import: torch.export archives (.pt2) to graphs
    {"backends", {"inductor"}},         // CPU (LLVM) and CUDA code generation
    {"aot", {"graph", "autograd"}},     // AOT autograd: joint graph, functionalization, partitioners
    {"api", {"inductor", "autograd", "aot"}},  // kiln::compile, the backend registry
    {"capture", {"graph", "api"}},      // tracing C++ functions into graphs
};

// `layer` and every folder it depends on, directly or not.
std::set<std::string> reachable_from(const std::string& layer) {
  std::set<std::string> seen;
  std::vector<std::string> todo{layer};
  while (!todo.empty()) {
    std::string l = todo.back();
    todo.pop_back();
    if (!seen.insert(l).second) continue;
    auto it = kLayerDeps.find(l);
    if (it != kLayerDeps.end()) todo.insert(todo.end(), it->second.begin(), it->second.end());
  }
  return seen;
}

// One line per #include that breaks the table: "src/eager/x.cpp:12: eager may not include ops/api.h".
std::vector<std::string> layering_violations(const fs::path& src) {
  std::vector<std::string> out;
  const std::regex include_line(R"(^\s*#\s*include\s*"([A-Za-z0-9_]+)/[^"]*")");
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file()) continue;
    std::string ext = entry.path().extension().string();
    if (ext != ".h" && ext != ".cpp" && ext != ".def" && ext != ".in") continue;
    fs::path rel = fs::relative(entry.path(), src);
    std::string layer = rel.begin()->string();
    if (rel.begin() == std::prev(rel.end())) continue;  // a file directly in src/
    if (!kLayerDeps.count(layer)) {
      out.push_back(fmt::format("src/{}: folder '{}' is not in kLayerDeps (tests/test_layering.cpp); add it",
                                rel.string(), layer));
      continue;
    }
    std::set<std::string> allowed = reachable_from(layer);
    std::ifstream in(entry.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      std::smatch m;
      if (!std::regex_search(line, m, include_line)) continue;
      std::string target = m[1];
      if (!fs::is_directory(src / target)) continue;  // not a src/ folder (a generated or third-party header)
      if (!allowed.count(target))
        out.push_back(fmt::format("src/{}:{}: {} may not include {} (see kLayerDeps in tests/test_layering.cpp)",
                                  rel.string(), n, layer, line.substr(line.find('"'))));
    }
  }
  return out;
}

TEST(Layering, TableHasNoCycle) {
  for (const auto& [layer, deps] : kLayerDeps)
    for (const std::string& d : deps) {
      EXPECT_TRUE(kLayerDeps.count(d)) << layer << " depends on unknown folder " << d;
      EXPECT_FALSE(reachable_from(d).count(layer)) << layer << " and " << d << " depend on each other";
    }
}

TEST(Layering, SourceTreeFollowsTheTable) {
  fs::path src = kiln::cli_test::source_path("src");
  ASSERT_TRUE(fs::is_directory(src / "eager")) << src;
  std::vector<std::string> bad = layering_violations(src);
  EXPECT_TRUE(bad.empty()) << fmt::format("{}", fmt::join(bad, "\n"));
}

TEST(Layering, EveryFolderOfSrcIsInTheTable) {
  for (const auto& entry : fs::directory_iterator(kiln::cli_test::source_path("src"))) {
    if (entry.is_directory()) {
      EXPECT_TRUE(kLayerDeps.count(entry.path().filename().string())) << entry.path();
    }
  }
}

// The check itself: an eager file including ops (the old cycle) and a core file including eager are reported
// with file and line; an include of a lower folder is not.
class LayeringCheck : public kiln::cli_test::CliTest {};

TEST_F(LayeringCheck, ReportsAnUpwardInclude) {
  fs::path root = dir_;
  for (const char* d : {"core", "eager", "ops"}) fs::create_directories(root / d);
  kiln::cli_test::write_file(root / "eager/tensor.cpp",
                             "#include \"eager/tensor.h\"\n#include \"core/dtype.h\"\n#include \"ops/api.h\"\n");
  kiln::cli_test::write_file(root / "core/dtype.h", "#pragma once\n  #include \"eager/tensor.h\"\n");
  kiln::cli_test::write_file(root / "ops/api.h", "#include \"eager/tensor.h\"\n#include <vector>\n");
  std::vector<std::string> bad = layering_violations(root);
  ASSERT_EQ(bad.size(), 2u) << fmt::format("{}", fmt::join(bad, "\n"));
  std::sort(bad.begin(), bad.end());
  const std::string see = " (see kLayerDeps in tests/test_layering.cpp)";
  EXPECT_EQ(bad[0], "src/core/dtype.h:2: core may not include \"eager/tensor.h\"" + see);
  EXPECT_EQ(bad[1], "src/eager/tensor.cpp:3: eager may not include \"ops/api.h\"" + see);
}

// The dispatcher reaches autograd only through the hook the engine installs at start-up (ops/dispatch.h): it is
// installed in this program, history is recorded through it, and without it a call needing history is an
// internal error rather than a silently missing grad_fn.
TEST(AutogradHookTest, InstalledAtStartupAndRequiredForHistory) {
  kiln::Tensor x = kiln::ones({3}).set_requires_grad(true);
  kiln::AutogradHook* engine = kiln::set_autograd_hook(nullptr);
  ASSERT_NE(engine, nullptr) << "src/autograd/autograd.cpp did not install the dispatcher's hook";
  try {
    kiln::add(x, x);
    kiln::set_autograd_hook(engine);
    FAIL() << "an op on a tensor requiring grad ran with no autograd hook";
  } catch (const kiln::Error& e) {
    kiln::set_autograd_hook(engine);
    EXPECT_TRUE(e.internal());
    EXPECT_NE(std::string(e.what()).find("no autograd hook is installed"), std::string::npos) << e.what();
  }
  kiln::Tensor y = kiln::mul(x, x);
  ASSERT_TRUE(y.grad_fn());
  kiln::sum(y).backward();
  EXPECT_EQ(x.grad().to_double_vector(), (std::vector<double>{2, 2, 2}));
}

}  // namespace
