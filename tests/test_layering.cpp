// Keeps the tree layered (docs/architecture.md, Layout): scans every #include "folder/..." line of every folder
// that holds code (the folders of src/, the tool libraries beside it, tools/, bench/, examples/, tests/) and fails
// when a folder includes one it does not depend on, e.g. src/eager including src/ops (the cycle eager <-> ops that
// the autograd hook in ops/dispatch.h broke) or repro/ including fuzz/. The allowed edges live in one table below,
// the few includes that cross it on purpose in another.
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

// Each folder that holds code and the folders it depends on directly; it may include those and, transitively,
// what they depend on. A folder of src/ is named by itself (src/backends/* counts as "backends"), a folder beside
// src/ likewise: `#include "graph/text.h"` is src/graph, `#include "repro/oracle.h"` is repro/. Lower layers
// first.
const std::map<std::string, std::set<std::string>> kLayerDeps = {
    // src/: the library (libkiln)
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
    // the tools' libraries beside src/, each on the one below it
    {"repro", {"api"}},                 // the failure layer: isolation, the oracle, repro files
    {"minifier", {"repro"}},            // the minifier, its oracle, the repro hook, emitters
    {"bisect", {"minifier"}},           // the accuracy bisector and kiln doctor
    {"fuzz", {"bisect"}},               // the graph generator and kiln fuzz (findings minified and bisected)
    {"gate", {"repro"}},                // CI gating and kiln bench
    {"trace", {"core"}},                // kiln trace report: KILN_TRACE's files as HTML and a Chrome trace
    // programs
    {"examples", {"capture"}},          // the capture demo
    {"tools", {"fuzz", "gate", "import", "backends", "trace"}},  // the kiln CLI (backends: the JIT's target for --version)
    {"bench", {"fuzz", "capture", "import", "backends", "trace"}},  // kiln-bench
    {"tests", {"tools", "capture"}},   // the test binary
};

// Includes that cross the table on purpose: the file, the included path and why.
struct Exception {
  std::string file, include, why;
};
const std::vector<Exception> kExceptions = {
    {"gate/bench.cpp", "bench/bench_util.h",
     "`kiln bench` times the way kiln-bench does: the header-only timer and cache flushing (on eager only), shared "
     "so that the two measure alike; gate/ depends on nothing else of bench/"},
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

bool is_code(const fs::path& p) {
  static const std::set<std::string> exts = {".h", ".cpp", ".c", ".def", ".in"};
  return exts.count(p.extension().string()) > 0;
}

// A CMake build tree (build/, build-asan/ inside the source tree): generated code, not the project's.
bool is_build_tree(const fs::path& dir) { return fs::exists(dir / "CMakeCache.txt"); }

// The folders of `root` that hold code, by layer name: src/'s folders and the top-level folders beside src/
// (hidden folders and build trees are not the project's code).
std::map<std::string, fs::path> code_folders(const fs::path& root) {
  std::map<std::string, fs::path> out;
  auto holds_code = [](const fs::path& dir) {
    for (const auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file() && is_code(e.path())) return true;
    return false;
  };
  for (const auto& top : fs::directory_iterator(root)) {
    std::string name = top.path().filename().string();
    if (!top.is_directory() || name.starts_with(".") || is_build_tree(top.path())) continue;
    if (name == "src") {
      for (const auto& sub : fs::directory_iterator(top.path()))
        if (sub.is_directory() && holds_code(sub.path())) out[sub.path().filename().string()] = sub.path();
    } else if (holds_code(top.path())) {
      out[name] = top.path();
    }
  }
  return out;
}

// One line per #include that breaks the table: "src/eager/x.cpp:12: eager may not include \"ops/api.h\" ...",
// and one per folder holding code that the table lacks. Paths are relative to `root` (the source tree).
std::vector<std::string> layering_violations(const fs::path& root) {
  std::vector<std::string> out;
  const std::regex include_line(R"re(^\s*#\s*include\s*"(([A-Za-z0-9_]+)/[^"]*)")re");
  const std::map<std::string, fs::path> folders = code_folders(root);
  for (const auto& [layer, dir] : folders) {
    if (!kLayerDeps.count(layer)) {
      out.push_back(fmt::format("{}: folder '{}' is not in kLayerDeps (tests/test_layering.cpp); add it",
                                fs::relative(dir, root).string(), layer));
      continue;
    }
    const std::set<std::string> allowed = reachable_from(layer);
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      if (!entry.is_regular_file() || !is_code(entry.path())) continue;
      const std::string rel = fs::relative(entry.path(), root).string();
      std::ifstream in(entry.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        std::smatch m;
        if (!std::regex_search(line, m, include_line)) continue;
        const std::string path = m[1], target = m[2];
        if (!folders.count(target)) continue;  // not a folder of the tree (a generated or third-party header)
        if (allowed.count(target)) continue;
        bool excepted = std::any_of(kExceptions.begin(), kExceptions.end(),
                                    [&](const Exception& e) { return e.file == rel && e.include == path; });
        if (!excepted)
          out.push_back(fmt::format("{}:{}: {} may not include \"{}\" (see kLayerDeps in tests/test_layering.cpp)",
                                    rel, n, layer, path));
      }
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
  fs::path root = fs::path(KILN_SOURCE_DIR);
  ASSERT_TRUE(fs::is_directory(root / "src/eager")) << root;
  std::vector<std::string> bad = layering_violations(root);
  EXPECT_TRUE(bad.empty()) << fmt::format("{}", fmt::join(bad, "\n"));
}

// Every folder that holds code is checked: the folders of src/ and the ones beside it.
TEST(Layering, EveryCodeFolderIsInTheTable) {
  std::map<std::string, fs::path> folders = code_folders(fs::path(KILN_SOURCE_DIR));
  for (const char* expected : {"core", "graph", "backends", "repro", "minifier", "bisect", "fuzz", "gate", "tools",
                               "bench", "examples", "tests"})
    EXPECT_TRUE(folders.count(expected)) << expected << " was not found as a folder holding code";
  for (const auto& [layer, dir] : folders) EXPECT_TRUE(kLayerDeps.count(layer)) << dir;
}

// An exception whose include is gone is removed from the list, so the list cannot hide a new crossing.
TEST(Layering, EveryExceptionIsStillNeeded) {
  const std::regex include_line(R"re(^\s*#\s*include\s*"([^"]*)")re");
  for (const Exception& e : kExceptions) {
    std::ifstream in(kiln::cli_test::source_path(e.file));
    ASSERT_TRUE(in) << e.file;
    bool found = false;
    std::string line;
    while (std::getline(in, line)) {
      std::smatch m;
      found |= std::regex_search(line, m, include_line) && m[1] == e.include;
    }
    EXPECT_TRUE(found) << e.file << " no longer includes " << e.include << "; remove its entry from kExceptions";
  }
}

// The check itself, on a synthetic tree: an eager file including ops (the old cycle), a core file including eager,
// a src/ file including a tool, and a tool including one above it are reported with file and line; an include of
// a lower folder, a third-party header and a listed exception are not; a folder the table lacks is reported.
class LayeringCheck : public kiln::cli_test::CliTest {};

TEST_F(LayeringCheck, ReportsAnUpwardIncludeAnywhereInTheTree) {
  fs::path root = dir_;
  for (const char* d : {"src/core", "src/eager", "src/ops", "src/graph", "repro", "fuzz", "gate", "bench"})
    fs::create_directories(root / d);
  kiln::cli_test::write_file(root / "src/eager/tensor.cpp",
                             "#include \"eager/tensor.h\"\n#include \"core/dtype.h\"\n#include \"ops/api.h\"\n");
  kiln::cli_test::write_file(root / "src/core/dtype.h", "#pragma once\n  #include \"eager/tensor.h\"\n");
  kiln::cli_test::write_file(root / "src/ops/api.h", "#include \"eager/tensor.h\"\n#include <vector>\n");
  kiln::cli_test::write_file(root / "src/graph/text.cpp", "#include \"ops/api.h\"\n#include \"repro/oracle.h\"\n");
  kiln::cli_test::write_file(root / "repro/oracle.cpp",
                             "#include \"graph/text.h\"\n#include \"fmt/format.h\"\n\n#include \"fuzz/check.h\"\n");
  kiln::cli_test::write_file(root / "fuzz/check.cpp", "#include \"repro/oracle.h\"\n");
  kiln::cli_test::write_file(root / "gate/bench.cpp", "#include \"bench/bench_util.h\"\n");  // the exception
  kiln::cli_test::write_file(root / "bench/bench_util.h", "#include \"eager/loops.h\"\n");
  fs::create_directories(root / "newtool");
  kiln::cli_test::write_file(root / "newtool/main.cpp", "#include \"core/error.h\"\n");
  fs::create_directories(root / "build/CMakeFiles");  // a build tree inside the source tree is not checked
  kiln::cli_test::write_file(root / "build/CMakeCache.txt", "");
  kiln::cli_test::write_file(root / "build/CMakeFiles/gen.cpp", "#include \"fuzz/check.h\"\n");
  std::vector<std::string> bad = layering_violations(root);
  ASSERT_EQ(bad.size(), 5u) << fmt::format("{}", fmt::join(bad, "\n"));
  std::sort(bad.begin(), bad.end());
  const std::string see = " (see kLayerDeps in tests/test_layering.cpp)";
  EXPECT_EQ(bad[0], "newtool: folder 'newtool' is not in kLayerDeps (tests/test_layering.cpp); add it");
  EXPECT_EQ(bad[1], "repro/oracle.cpp:4: repro may not include \"fuzz/check.h\"" + see);
  EXPECT_EQ(bad[2], "src/core/dtype.h:2: core may not include \"eager/tensor.h\"" + see);
  EXPECT_EQ(bad[3], "src/eager/tensor.cpp:3: eager may not include \"ops/api.h\"" + see);
  EXPECT_EQ(bad[4], "src/graph/text.cpp:2: graph may not include \"repro/oracle.h\"" + see);
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
