// Issue 31, "trust, round 2": data loss, litter, resume and memory limits, end to end through the `kiln` binary
// (KILN_CLI) where a user would notice. `kiln fmt -i` keeps npy constants as references and hard links as
// links, and never writes past a file size limit; an edited minifier checkpoint or state file is an input error;
// a signal leaves no lock or temporary directory, and a lock a killed process left is taken over; the kernel
// cache keeps no object without its .meta; kiln starts (or says why it cannot) under `ulimit -v`.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <thread>

#include "cli_run.h"
#include "core/files.h"
#include "core/hash.h"
#include "core/options.h"
#include "eager/npy.h"
#include "eager/tensor.h"
#include "graph/text.h"
#include "inductor/kernel_disk_cache.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// `kiln <args>` under `timeout 60`: a regression into a hang fails instead of stopping the suite.
cli_test::CliResult run_kiln(const std::string& args, const std::string& env = "") {
  return cli_test::kiln_cli(args, env + " timeout 60");
}

class Trust : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kiln_test_trust_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::permissions(dir_, fs::perms::owner_all);  // private whatever the umask (the kernel cache checks)
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return (dir_ / name).string();
  }
  // The names in the test directory, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  fs::path dir_;
};

const char* kRelu = "graph g(%x: f32[4]) {\n  %y = relu(%x) : f32[4]\n  return %y\n}\n";

// Starts `kiln args...` with `env` added to this process's environment, stdout and stderr to `log`; its pid.
pid_t start_kiln(const std::vector<std::string>& args, const std::vector<std::string>& env, const fs::path& log) {
  pid_t pid = ::fork();
  if (pid == 0) {
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1), ::dup2(fd, 2);
    std::vector<char*> argv{const_cast<char*>(KILN_CLI)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(KILN_CLI, argv.data());
    ::_exit(127);
  }
  return pid;
}

// Waits until `ready` holds (polling), at most `seconds`.
bool wait_for(const std::function<bool()>& ready, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return ready();
}

}  // namespace

// ---------------------------------------------------------------- kiln fmt -i

// The issue's case at a small size: a constant read from a .npy file stays that reference (it was inlined, and
// a 25M-element weight became a 312 MB text `kiln verify` refuses).
TEST_F(Trust, FmtKeepsNpyConstantsAsReferences) {
  std::vector<float> w(1000);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i) * 0.5f;
  write_npy((dir_ / "w.npy").string(), Tensor::from_vector<float>(w, {1000}));
  const std::string hash = sha256_hex(std::string(reinterpret_cast<const char*>(w.data()), w.size() * 4));
  const std::string ref = "npy(\"w.npy\") sha256=\"" + hash + "\"";
  const std::string g = file("g.kir", "graph g(%x: f32[1000]) {\n  %w = constant f32[1000]   " + ref +
                                          "\n  %y = mul(%x, %w)\n  return %y\n}\n");
  const std::string formatted = "graph g(%x: f32[1000]) {\n  %w = constant f32[1000] " + ref +
                                "\n  %y = mul(%x, %w) : f32[1000]\n  return %y\n}\n";
  cli_test::CliResult printed = run_kiln("fmt " + g);
  ASSERT_EQ(printed.exit_code, 0) << printed.output;
  EXPECT_EQ(printed.output, formatted);
  cli_test::CliResult r = run_kiln("fmt -i " + g);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(cli_test::read_text(g), formatted);
  EXPECT_EQ(run_kiln("verify " + g).exit_code, 0);
}

// A canonical graph whose larger constants live in .npy files (as save_graph writes them) is a fixed point of
// `kiln fmt`: every reference stays, and nothing else changes.
RC_GTEST_PROP(TrustFmt, CanonicalGraphsWithNpyConstantsAreFixedPoints, ()) {
  const fs::path dir = fs::temp_directory_path() / ("kiln_test_trust_prop_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  graph::Graph g;
  std::vector<graph::ValueId> outs{g.add_input("x", TensorMeta{DType::F32, {3}, {1}, {}})};
  const int constants = *rc::gen::inRange(1, 5);
  for (int i = 0; i < constants; ++i) {
    const int64_t n = *rc::gen::element<int64_t>(1, 5, 64, 65, 300);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v) f = float(*rc::gen::inRange(-1000, 1000)) / 8;
    outs.push_back(g.add_constant("c" + std::to_string(i), Tensor::from_vector<float>(v, {n})));
  }
  g.set_outputs(outs);
  const std::string path = (dir / "g.kir").string();
  graph::PrintOptions po;
  po.npy_dir = dir.string();
  const std::string text = graph::print_graph(g, po);
  std::ofstream(path) << text;
  const std::string formatted = graph::print_graph_keeping_comments(graph::parse_graph(text, path), text, path);
  fs::remove_all(dir);
  RC_ASSERT(formatted == text);
}

TEST_F(Trust, FmtInPlaceKeepsHardLinksOneFile) {
  const std::string messy = "graph g(%x: f32[4]) {\n  %y = relu(%x)   # the op\n  return %y\n}\n";
  const std::string a = file("a.kir", messy);
  fs::create_hard_link(a, dir_ / "b.kir");
  struct stat before {};
  ASSERT_EQ(::stat(a.c_str(), &before), 0);
  cli_test::CliResult r = run_kiln("fmt -i " + a);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string formatted = "graph g(%x: f32[4]) {\n  %y = relu(%x) : f32[4]  # the op\n  return %y\n}\n";
  EXPECT_EQ(cli_test::read_text(a), formatted);
  EXPECT_EQ(cli_test::read_text(dir_ / "b.kir"), formatted);  // the other name shows the same file
  struct stat after {};
  ASSERT_EQ(::stat(a.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(after.st_nlink, 2u);
  EXPECT_EQ(entries(), (std::vector<std::string>{"a.kir", "b.kir"}));  // no temporary file
}

// Writing through the inode is not atomic, so what would fail part-way is refused before the first byte: a
// file size limit the output passes (the kernel would stop the write there).
TEST_F(Trust, FmtInPlaceOfAHardLinkedFileRefusesWhatCannotBeWhole) {
  std::string messy = "graph g(%x: f32[4]) {\n";
  for (int i = 0; i < 60; ++i) messy += "  %y" + std::to_string(i) + " = relu(%x)\n";
  messy += "  return %y59\n}\n";
  const std::string a = file("a.kir", messy);
  fs::create_hard_link(a, dir_ / "b.kir");
  ASSERT_GT(run_kiln("fmt " + a).output.size(), 1024u);
  // bash's `ulimit -f` counts 1024-byte blocks; SIGXFSZ ignored, as a shell's `trap '' XFSZ` leaves it.
  cli_test::CliResult r = cli_test::shell("bash -c \"trap '' XFSZ; ulimit -f 1; timeout 60 '" KILN_CLI "' fmt -i " +
                                          a + "\"");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "file size limit")) << r.output;
  EXPECT_TRUE(has(r.output, "the file is unchanged")) << r.output;
  EXPECT_EQ(cli_test::read_text(a), messy);
  EXPECT_EQ(cli_test::read_text(dir_ / "b.kir"), messy);
}

// ---------------------------------------------------------------- minify --resume

// Every field of OUT.state.json is input: an edited value is an error naming the file and the field (exit 2),
// never an internal error (exit 3) nor a run that trusts it.
TEST_F(Trust, ResumeChecksEveryStateField) {
  const std::string g = file("g.kir", kRelu), out = (dir_ / "m.repro").string();
  const std::string env = "KILN_INJECT=relu:compile_error";
  cli_test::CliResult first = run_kiln("minify " + g + " --backend inductor -q -o " + out, env);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string state = cli_test::read_text(out + ".state.json");
  struct Case {
    std::string field, replacement, message;
  };
  const std::vector<Case> cases = {
      {"oracle_calls", "-5", "\"oracle_calls\" is -5, not a count"},
      {"cache_hits", "1e30", "\"cache_hits\" is 1e+30, not a count"},
      {"accepted", "\"many\"", "\"accepted\" is \"many\", not a count"},
      {"start_ops", "99999999999", "\"start_ops\" is 99999999999, not a count"},
      {"seconds", "-1.5", "\"seconds\" is -1.5, not seconds"},
      {"seconds", "null", "\"seconds\" is null, not seconds"},
      {"target_kind", "\"none\"", "\"target_kind\" is \"none\", not a failure"},
      {"target_kind", "\"exploded\"", "unknown failure kind 'exploded'"},
      {"target_message", "7", "\"target_message\" is 7, not a string"},
      {"backend", "[]", "\"backend\" is [], not a string"},
  };
  for (const Case& c : cases) {
    const std::regex field("\"" + c.field + "\": [^,\\n]*");
    std::string edited = std::regex_replace(state, field, "\"" + c.field + "\": " + c.replacement);
    ASSERT_NE(edited, state) << c.field;
    std::ofstream(out + ".state.json", std::ios::trunc) << edited;
    cli_test::CliResult r = run_kiln("minify " + g + " --backend inductor -q --resume -o " + out, env);
    EXPECT_EQ(r.exit_code, 2) << c.field << " = " << c.replacement << "\n" << r.output;
    EXPECT_TRUE(has(r.output, "cannot resume")) << r.output;
    EXPECT_TRUE(has(r.output, c.message)) << r.output;
  }
  // A field left out.
  std::ofstream(out + ".state.json", std::ios::trunc)
      << std::regex_replace(state, std::regex("\\s*\"accepted\": [^,\\n]*,"), "");
  cli_test::CliResult r = run_kiln("minify " + g + " --backend inductor -q --resume -o " + out, env);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r.output, out + ".state.json has no \"accepted\" field")) << r.output;
  // The recorded state, untouched, resumes.
  std::ofstream(out + ".state.json", std::ios::trunc) << state;
  r = run_kiln("minify " + g + " --backend inductor -q --resume -o " + out, env);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// An edited checkpoint (OUT) that no longer shows the recorded failure, or that changes a value's type, or a
// state whose target the checkpoint does not show: exit 2 naming the file (it was "a kiln bug", exit 3).
TEST_F(Trust, ResumeChecksTheCheckpoint) {
  const std::string g = file("g.kir", "graph g(%x: f32[4]) {\n  %a = neg(%x) : f32[4]\n  %y = relu(%a) : f32[4]\n"
                                      "  return %y\n}\n");
  const std::string out = (dir_ / "m.repro").string(), env = "KILN_INJECT=relu:compile_error";
  auto fresh = [&] {
    cli_test::CliResult first = run_kiln("minify " + g + " --backend inductor -q -o " + out, env);
    ASSERT_EQ(first.exit_code, 0) << first.output;
  };
  auto resume = [&] { return run_kiln("minify " + g + " --backend inductor -q --resume -o " + out, env); };
  fresh();
  const std::string repro = cli_test::read_text(out);
  ASSERT_TRUE(has(repro, "relu(")) << repro;
  // The failing op replaced: the checkpoint passes.
  std::ofstream(out, std::ios::trunc) << std::regex_replace(repro, std::regex("relu\\("), "abs(");
  cli_test::CliResult r = resume();
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "cannot resume: the checkpoint " + out + " does not show the failure")) << r.output;
  // A value's shape changed to one the minifier cannot have made (larger than the original's; its shrink move
  // only makes sizes smaller).
  fresh();
  const std::string reshaped = std::regex_replace(cli_test::read_text(out), std::regex("f32\\[\\d+\\]"), "f32[8]");
  std::ofstream(out, std::ios::trunc) << reshaped;
  r = resume();
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "cannot resume: the checkpoint " + out + " declares %")) << r.output;
  // The state's target changed to another failure than the checkpoint shows.
  fresh();
  const std::string state = cli_test::read_text(out + ".state.json");
  std::ofstream(out + ".state.json", std::ios::trunc)
      << std::regex_replace(state, std::regex("\"target_kind\": \"compile_error\""), "\"target_kind\": \"crash\"");
  r = resume();
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "does not show the failure " + out + ".state.json records (crash")) << r.output;
}

// ---------------------------------------------------------------- litter

// SIGTERM and SIGINT of a running `kiln minify`: the lock and the temporary directory go, and it dies by the
// signal (a shell's 128 + N).
TEST_F(Trust, SignalledMinifyLeavesNothingBehind) {
  const std::string g = file("g.kir", kRelu), out = (dir_ / "m.repro").string();
  for (int sig : {SIGTERM, SIGINT}) {
    // The original hangs in the warm-up child, so the run waits there (with its temporary directory) until
    // the time limit.
    pid_t pid = start_kiln({"minify", g, "--backend", "inject_test", "--timeout", "30", "-q", "-o", out},
                           {"KILN_INJECT=relu:hang", "TMPDIR=" + dir_.string()}, dir_.string() + ".log");
    ASSERT_GT(pid, 0);
    auto temp_dir_exists = [&] {
      for (const std::string& e : entries())
        if (e.rfind("kiln-minify-", 0) == 0) return true;
      return false;
    };
    ASSERT_TRUE(wait_for(temp_dir_exists, 60)) << "no temporary directory appeared";
    EXPECT_TRUE(fs::exists(out + ".lock"));
    ASSERT_EQ(::kill(pid, sig), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "status " << status;
    EXPECT_EQ(entries(), std::vector<std::string>{"g.kir"}) << "signal " << sig;
  }
  fs::remove(dir_.string() + ".log");
}

// kill -9 leaves the lock file; the next run finds its owner gone, takes it over with a note, and removes it.
TEST_F(Trust, ALockAKilledProcessLeftIsTakenOver) {
  const std::string g = file("g.kir", kRelu), dump = (dir_ / "dump").string();
  pid_t pid = ::fork();
  if (pid == 0) {
    OutputLock lock(dump);
    ::raise(SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  const std::string record = cli_test::read_text(dump + ".lock");
  EXPECT_TRUE(has(record, "pid " + std::to_string(pid) + "\n")) << record;
  cli_test::CliResult r = run_kiln("run " + g + " --dump " + dump);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "kiln: note: " + dump + ".lock was left by process " + std::to_string(pid) +
                                ", which ended without removing it (killed?); taking it over")) << r.output;
  EXPECT_FALSE(fs::exists(dump + ".lock"));
  EXPECT_TRUE(fs::exists(dump + "/output_0.npy"));
  // One from before a reboot (another boot id) is stale whatever its pid.
  file("dump.lock", "pid 1\nboot 00000000-0000-0000-0000-000000000000\n");
  r = run_kiln("run " + g + " --dump " + dump);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "was left by process 1, before the machine restarted")) << r.output;
  EXPECT_FALSE(fs::exists(dump + ".lock"));
  // A live owner is named, and keeps its lock.
  {
    OutputLock held(dump);
    r = run_kiln("run " + g + " --dump " + dump);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_TRUE(has(r.output, "another kiln process is writing it (process " + std::to_string(::getpid()) +
                                  " holds " + dump + ".lock)")) << r.output;
    EXPECT_TRUE(fs::exists(dump + ".lock"));
  }
  EXPECT_FALSE(fs::exists(dump + ".lock"));
}

// A full disk between the object and its .meta (here: a file size limit the .meta passes) leaves no object.
TEST_F(Trust, KernelCacheKeepsNoObjectWithoutItsMeta) {
  const fs::path cache = dir_ / "cache";
  pid_t pid = ::fork();
  if (pid == 0) {
    ScopedOption dir(Opt::CacheDir, cache.string());
    inductor::KernelDiskCache c("kernels-test", ".o");
    const std::string material(64 << 10, 'k');  // the .meta records it: larger than the object
    const rlimit small{32 << 10, 32 << 10};
    ::signal(SIGXFSZ, SIG_IGN);
    ::setrlimit(RLIMIT_FSIZE, &small);
    c.store(sha256_hex(material), material, std::string(1024, 'o'), "a test kernel");
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ASSERT_TRUE(fs::is_directory(cache / "kernels-test"));
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(cache / "kernels-test")) left.push_back(e.path().filename().string());
  EXPECT_TRUE(left.empty()) << left.front();
}

// ---------------------------------------------------------------- memory limits

// Under `ulimit -v` kiln starts and runs, or fails at once with a message and exit 2 (it spun forever in
// OpenBLAS's constructor, before main). Below what its shared libraries take, the dynamic loader refuses the
// program (exit 127) before any of kiln's code runs. The minimum the message names is enough to start.
TEST_F(Trust, StartsOrFailsClearlyUnderAnAddressSpaceLimit) {
  if (KILN_SANITIZED) GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space";
  const std::string g = file("g.kir", kRelu);
  auto under = [&](long kb, const std::string& args) {
    return cli_test::shell("bash -c \"ulimit -v " + std::to_string(kb) + "; timeout 60 '" KILN_CLI "' " + args + "\"",
                           "KILN_CACHE_DIR=" + (dir_ / "cache").string());
  };
  std::string minimum;
  for (long kb : {1000000L, 600000L, 400000L, 300000L, 100000L})
    for (const std::string& args : {std::string("--version"), "run --backend inductor --seed 0 " + g}) {
      cli_test::CliResult r = under(kb, args);
      const std::string what = "ulimit -v " + std::to_string(kb) + "; kiln " + args + "\n" + r.output;
      ASSERT_NE(r.exit_code, 124) << "hung: " << what;
      if (r.exit_code == 0) continue;
      if (r.exit_code == 127) {
        EXPECT_TRUE(has(r.output, "error while loading shared libraries")) << what;
        continue;
      }
      EXPECT_EQ(r.exit_code, 2) << what;
      EXPECT_TRUE(has(r.output, "kiln: error:")) << what;
      std::smatch m;
      if (std::regex_search(r.output, m, std::regex("needs at least [0-9]+ MiB \\(ulimit -v ([0-9]+)\\)")))
        minimum = m[1];
    }
  // A graph that needs more than the limit leaves: out of memory, exit 2.
  const std::string big = file("big.kir", "graph g(%x: f32[200000000]) {\n  %y = relu(%x) : f32[200000000]\n"
                                          "  return %y\n}\n");
  cli_test::CliResult r = under(900000, "run --seed 0 " + big);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "kiln: error: out of memory")) << r.output;
  if (!minimum.empty()) {
    cli_test::CliResult r = under(std::stol(minimum), "--version");
    EXPECT_EQ(r.exit_code, 0) << "ulimit -v " << minimum << "\n" << r.output;
  }
}
