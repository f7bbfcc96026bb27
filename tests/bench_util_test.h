// Shared by the `kiln bench` tests: a memory-bound graph whose speed depends on fusion, the fixture that writes
// it, and running `kiln bench` on one OpenMP thread.
#pragma once
#include <string>

#include "cli_run.h"

namespace kiln::cli_test {

// One OpenMP thread: where other processes share the two cores, a team of two spinning threads makes single
// calls many times slower at random; timings on one thread move with the machine's load only.
inline CliResult bench_cli(const std::string& args, const std::string& env = "") {
  return kiln_cli(args, "OMP_NUM_THREADS=1 " + env);
}

// 48 cheap pointwise ops over 2 MiB: fused, one pass over memory; unfused (fusion disabled), 48 (about 14x
// slower on the 2-core VM, well clear of the noise of a loaded machine: memory-bound, so fusion makes it fast).
inline std::string chain_graph() {
  std::string g = "graph chain(%x: f32[512, 1024]) {\n";
  std::string prev = "%x";
  for (int i = 0; i < 48; ++i) {
    g += "  %v" + std::to_string(i) + " = " + (i % 2 ? "abs" : "neg") + "(" + prev + ") : f32[512, 1024]\n";
    prev = "%v" + std::to_string(i);
  }
  return g + "  return " + prev + "\n}\n";
}

class Bench : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    write_file(dir_ / "chain.kir", chain_graph());
  }
};

}  // namespace kiln::cli_test
