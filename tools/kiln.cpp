// The kiln command-line tool: one binary, one subcommand per job. Library code throws kiln::Error; this file
// alone turns errors into a message on stderr and a non-zero exit code.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "core/error.h"
#include "kiln_version.h"
#include "ops/blas.h"
#include "runtime/jit.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"kiln: a compact torch.compile stack with first-class troubleshooting tools"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version,
               "print the version and git hash, the BLAS kiln runs and the target its JIT compiles for");
  kiln::cli::add_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (version) {
      std::printf("kiln %s (git %s)\nBLAS: %s\nJIT: %s\n", KILN_VERSION, KILN_GIT_HASH,
                  kiln::blas_description().c_str(), kiln::runtime::KernelJit::instance().target_description().c_str());
      return 0;
    }
    if (app.get_subcommands().empty()) {
      std::cout << app.help();
      return 0;
    }
    return kiln::cli::run_selected(app);
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln: %s: %s\n", e.internal() ? "internal error" : "error", e.what());
    return e.internal() ? 3 : 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: internal error: %s\n", e.what());
    return 3;
  }
}
