// KILN_DEBUG_DIR's layout (debug_dir.h): claiming a dump's directory and indexing it.
#include "core/debug_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "core/files.h"
#include "core/options.h"

namespace kiln {
namespace {

// One TSV field: tabs, line breaks and backslashes escaped, so a name or an argument never splits a line.
std::string tsv_field(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\t') out += "\\t";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\\') out += "\\\\";
    else out += c;
  }
  return out;
}

// This process's command line (argv joined by spaces, each argument TSV-escaped), made once.
const std::string& command_line() {
  static const std::string line = [] {
    std::string out;
    for (const std::string& word : process_argv()) out += (out.empty() ? "" : " ") + tsv_field(word);
    return out;
  }();
  return line;
}

// Appends one line to <root>/index.tsv in one write (O_APPEND: lines of processes sharing the root do not mix).
void index_line(const std::filesystem::path& root, const std::string& line) {
  const std::string path = (root / "index.tsv").string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
  KILN_CHECK(fd >= 0, "KILN_DEBUG_DIR: cannot write {} ({})", path, std::strerror(errno));
  const ssize_t written = ::write(fd, line.data(), line.size());
  const int err = errno;
  ::close(fd);
  KILN_CHECK(written == ssize_t(line.size()), "KILN_DEBUG_DIR: cannot write {} ({})", path, std::strerror(err));
}

}  // namespace

std::filesystem::path claim_debug_dir(std::string_view stage, std::string_view graph_name) {
  const std::string root_text = opt_string(Opt::DebugDir);
  if (root_text.empty()) return {};
  const std::filesystem::path root(root_text);
  const std::string stage_stem = safe_file_stem(stage), graph_stem = safe_file_stem(graph_name);
  create_output_directory((root / stage_stem).string());
  // Where this process's next claim in each stage's directory starts looking (earlier numbers are taken).
  static std::mutex mutex;
  static std::map<std::string, int, std::less<>> next;
  std::lock_guard lock(mutex);
  int& first_free = next[(root / stage_stem).string()];
  for (int n = first_free;; ++n) {
    const std::string name = fmt::format("{:03}_{}", n, graph_stem);
    const std::filesystem::path dir = root / stage_stem / name;
    if (::mkdir(dir.c_str(), 0777) == 0) {
      first_free = n + 1;
      index_line(root, fmt::format("{}/{}\t{}\t{}\t{}\n", stage_stem, name, tsv_field(graph_name), ::getpid(),
                                   command_line()));
      return dir;
    }
    KILN_CHECK(errno == EEXIST, "KILN_DEBUG_DIR: cannot create {} ({})", dir.string(), std::strerror(errno));
  }
}

}  // namespace kiln
