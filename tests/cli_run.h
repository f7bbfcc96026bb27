// Running the built `kiln` binary (KILN_CLI) from tests the way a user does: a shell command with an
// environment, its output (stdout and stderr together) and exit status; a fresh directory per test.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::cli_test {

struct CliResult {
  int exit_code;       // -1 when killed by a signal
  int signal = 0;      // the signal that ended it, if any
  std::string output;  // stdout and stderr together
};

// Runs `command` under /bin/sh with `env` prepended (e.g. "KILN_LOGS=passes"); `kiln` at the start of the
// command is the binary under test.
inline CliResult shell(const std::string& command, const std::string& env = "") {
  std::string cmd = command;
  if (cmd.rfind("kiln ", 0) == 0) cmd = "'" KILN_CLI "'" + cmd.substr(4);
  cmd = "exec 2>&1; " + env + (env.empty() ? "" : " ") + cmd;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, 0, "popen failed"};
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int status = pclose(p);
  if (WIFEXITED(status)) {
    int code = WEXITSTATUS(status);
    return {code >= 128 ? -1 : code, code >= 128 ? code - 128 : 0, out};  // the shell reports a signal as 128+N
  }
  return {-1, WIFSIGNALED(status) ? WTERMSIG(status) : 0, out};
}

// How to run the kiln CLI: "kiln" (shell() runs this build's) where this build's exists, else, in a bundle on the
// device machine, the one ci/gpu-test.sh names in GPU_TEST_KILN (quoted); "" when there is none.
inline std::string kiln_command() {
  if (std::filesystem::exists(KILN_CLI)) return "kiln";
  const char* bundled = std::getenv("GPU_TEST_KILN");
  return bundled && *bundled ? "'" + std::string(bundled) + "'" : "";
}

// Runs `kiln <args>` (the binary under test) with `env` prepended.
inline CliResult kiln_cli(const std::string& args, const std::string& env = "") { return shell("kiln " + args, env); }

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

// The headless browser the report tests render pages with ("" when none is installed).
inline std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"})
    if (shell(std::string("command -v ") + name).exit_code == 0) return name;
  return "";
}

// A python3 that can import torch and numpy, or "" (tests needing one are then skipped; ci/install-deps.sh
// installs Debian's python3-torch).
inline std::string python_with_torch() {
  for (const char* py : {"python3", "/usr/bin/python3"})
    if (shell(std::string(py) + " -c 'import torch, numpy'").exit_code == 0) return py;
  return "";
}

inline std::filesystem::path source_path(const std::string& relative) {
  return std::filesystem::path(KILN_SOURCE_DIR) / relative;
}

// A fresh directory per test, removed afterwards.
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kiln_cli_suite_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    // Private whatever the umask: the kernel cache (KILN_CACHE_DIR under it) refuses a directory others may write.
    std::filesystem::permissions(dir_, std::filesystem::perms::owner_all);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string file(const std::string& name, const std::string& text) {
    write_file(dir_ / name, text);
    return (dir_ / name).string();
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

}  // namespace kiln::cli_test
