// The test binary starts from a known environment: every KILN_* variable the shell that ran it had set is
// removed before any test (or any static initialiser reading kiln's options) runs, so a developer's KILN_LOGS or
// KILN_INJECT, or a CI script's variable of that prefix, cannot change what a test sees or what the kiln
// processes it starts print (kiln warns about KILN_* names it does not know, and tests compare whole outputs).
// Tests that want a setting pass it themselves (cli_run.h's env argument, or setenv in the test). Kept:
// KILN_CACHE_DIR, which ci/gpu-test.sh points at a fresh directory so the suite neither reads nor fills the
// user's kernel cache.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

// A constructor of the highest priority a program may use: it runs before every other static initialiser, so
// none (in the tests or in libkiln) can read a KILN_* variable first.
__attribute__((constructor(101))) void remove_inherited_kiln_variables() {
  std::vector<std::string> names;
  for (char** entry = environ; *entry; ++entry) {
    const char* eq = std::strchr(*entry, '=');
    std::string name = eq ? std::string(*entry, size_t(eq - *entry)) : std::string(*entry);
    if (name.rfind("KILN_", 0) == 0 && name != "KILN_CACHE_DIR") names.push_back(name);
  }
  for (const std::string& name : names) ::unsetenv(name.c_str());
}

}  // namespace
