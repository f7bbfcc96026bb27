// libFuzzer target for repro files (repro/repro.h): the header parser (options, inputs, hashes, numbers, paths)
// and the graph after it. Every input must either be rejected with a kiln::Error or parse into a repro that
// prints back to text that parses to the same repro. Any other exception, a crash, a sanitizer report or a
// round-trip mismatch is a finding. Options are only validated, never left applied. Build and run: ci/fuzz.sh.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "repro/repro.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::ReproFile r;
  try {
    // A file name in a directory that does not exist: paths in the header cannot reach real files.
    r = kiln::parse_repro(text, "/nonexistent/fuzz.repro");
  } catch (const kiln::Error&) {
    return 0;
  }
  std::string printed;
  try {
    printed = kiln::print_repro(r);
    kiln::ReproFile back = kiln::parse_repro(printed, "/nonexistent/printed.repro");
    if (kiln::print_repro(back) == printed) return 0;
    std::fprintf(stderr, "round trip mismatch: reprinted as\n%s\n", kiln::print_repro(back).c_str());
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "the printed repro does not parse: %s\n", e.what());
  }
  std::fprintf(stderr, "printed repro:\n%s\n", printed.c_str());
  std::abort();
}
