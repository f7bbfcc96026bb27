// The kiln command-line tool: one binary, one subcommand per job. Library code throws kiln::Error; this file
// alone turns errors into a message on stderr and a non-zero exit code.
#include <CLI/CLI.hpp>
#include <sys/resource.h>

#include <cstdio>
#include <new>
#include <iostream>

#include "core/build_id.h"
#include "core/error.h"
#include "core/escape.h"
#include "core/fired.h"
#include "core/options.h"
#include "kiln_version.h"
#include "ops/blas.h"
#include "backends/cpu/jit.h"
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
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --help-options: printed, success
    // Every other CLI11 error is bad input: exit 2 like every other (docs/cli.md), not CLI11's own codes.
    std::fprintf(stderr, "kiln: error: %s\n(`kiln --help` lists the commands, `kiln <command> --help` a command's "
                 "options)\n", kiln::terminal_safe_lines(e.what()).c_str());
    return 2;
  }
  // Every set KILN_* variable is checked now, whichever command and backend run (options.h).
  if (std::vector<std::string> bad = kiln::option_errors(); !bad.empty()) {
    for (const std::string& b : bad) std::fprintf(stderr, "kiln: error: %s\n", kiln::terminal_safe_lines(b).c_str());
    std::fprintf(stderr, "(`kiln --help-options` lists every option and its valid values)\n");
    return 2;
  }
  try {
    if (version) {
      std::printf("kiln %s (git %s)\nBuild: %s\nBLAS: %s\nJIT: %s\n", KILN_VERSION, KILN_GIT_HASH,
                  kiln::build_identity().c_str(), kiln::blas_description().c_str(),
                  kiln::runtime::KernelJit::instance().target_description().c_str());
      return 0;
    }
    if (app.get_subcommands().empty()) {
      std::fprintf(stderr, "kiln: error: no command given\n\n");
      std::cerr << app.help();
      return 2;
    }
    const int status = kiln::cli::run_selected(app);
    kiln::warn_unfired_settings();  // once per run, however many children compiled (core/fired.h)
    return status;
  } catch (const kiln::Error& e) {
    // Messages quote users' names (values, files): printed terminal_safe, so none can drive the terminal.
    std::fprintf(stderr, "kiln: %s: %s\n", e.internal() ? "internal error" : "error",
                 kiln::terminal_safe_lines(e.what()).c_str());
    kiln::warn_unfired_settings();  // "nothing to minify" reads better beside "KILN_INJECT=... never fired"
    return e.internal() ? 3 : 2;
  } catch (const std::bad_alloc&) {
    // The machine's limit, not a kiln bug: say which limit, when one is set (docs/cli.md, Memory limits).
    struct rlimit as {};
    const bool limited = ::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY;
    std::fprintf(stderr, "kiln: error: out of memory%s%s\n",
                 limited ? fmt::format(" under the address-space limit (ulimit -v) of {} MiB", as.rlim_cur >> 20).c_str()
                         : "",
                 limited ? "; raise the limit or run a smaller graph" : "; run a smaller graph or free memory");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: internal error: %s\n", kiln::terminal_safe_lines(e.what()).c_str());
    return 3;
  }
}
