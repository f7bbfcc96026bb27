// Issue 22, "repro files and graphs are untrusted input": the file-handling rules of src/core/files.h and their
// users, end to end through the `kiln` binary (KILN_CLI) where a user would notice. Options a repro may set;
// the kernel cache's verified entries; value names as file names; paths inside files; atomic, mode-keeping,
// locked outputs that never replace what is not a regular file; input files that are regular and bounded;
// number fields that are checked.
#include <fcntl.h>
#include <gtest/gtest.h>

#include "cli_run.h"
#include <rapidcheck/gtest.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "backends/cpu/jit.h"
#include "core/build_id.h"
#include "core/files.h"
#include "core/hash.h"
#include "eager/npy.h"
#include "core/options.h"
#include "graph/inputs.h"
#include "graph/text.h"
#include "inductor/compile.h"
#include "inductor/compile_options.h"
#include "minifier/minifier.h"
#include "repro/repro.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

// `kiln <args>` with `env` prepended, under `timeout 60` so that a regression into reading a FIFO or a device
// forever fails instead of hanging.
cli_test::CliResult run_kiln(const std::string& args, const std::string& env = "") {
  return cli_test::kiln_cli(args, env + " timeout 60");
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class Files : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kiln_test_files_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // Private whatever the umask: the kernel cache (KILN_CACHE_DIR under it) refuses a directory others may write.
    fs::permissions(dir_, fs::perms::owner_all);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

const char* kRelu = "graph g(%x: f32[4]) {\n  %y = relu(%x) : f32[4]\n  return %y\n}\n";

std::string repro_text(const std::string& header_lines) {
  return "kiln-repro: 1\nbackend: eager\n" + header_lines + "failure: none\nmessage: \"\"\n\n" + kRelu;
}

}  // namespace

// ---------------------------------------------------------------- 1. options a repro may set

TEST_F(Files, ReproMayNotSetTheCacheDirectory) {
  // The issue's example: a repro pointing the kernel cache at a directory of its own objects.
  fs::create_directories(dir_ / "dir");
  std::string r = file("r.repro", repro_text("config: KILN_CACHE_DIR=dir\ninputs: seed 0\n"));
  cli_test::CliResult out = run_kiln("repro run " + r);
  EXPECT_EQ(out.exit_code, 2) << out.output;
  EXPECT_TRUE(has(out.output, r + ":3:1: a repro file may not set KILN_CACHE_DIR")) << out.output;
  EXPECT_TRUE(has(out.output, "KILN_INJECT")) << out.output;  // says which options a repro may set
  EXPECT_TRUE(fs::is_empty(dir_ / "dir"));
}

TEST_F(Files, ReproMayNotWriteWhereItSays) {
  for (const char* line : {"KILN_DEBUG_DIR=out", "KILN_CACHE_DIR=/", "KILN_REPRO_AFTER=backend"}) {
    std::string r = file("r.repro", repro_text(std::string("config: ") + line + "\ninputs: seed 0\n"));
    cli_test::CliResult out = run_kiln("repro run " + r);
    EXPECT_EQ(out.exit_code, 2) << line << "\n" << out.output;
    EXPECT_TRUE(has(out.output, "a repro file may not set")) << out.output;
    out = run_kiln("minify " + r + " -q");  // the minifier reads repros through the same check
    EXPECT_EQ(out.exit_code, 2) << line << "\n" << out.output;
    EXPECT_TRUE(has(out.output, "a repro file may not set")) << out.output;
  }
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

// The class: every option of the table is either settable by a repro (and then accepted with its default value)
// or refused with the rule; a new option is refused until its row says otherwise.
TEST(ReproOptions, EveryOptionIsSettableOrRefused) {
  for (const OptionSpec& spec : option_table()) {
    std::string text = repro_text(fmt::format("config: {}={}\ninputs: seed 0\n", spec.env, spec.default_value));
    if (spec.repro_settable()) {
      EXPECT_NO_THROW(parse_repro(text, "r.repro")) << spec.env;
      continue;
    }
    try {
      parse_repro(text, "r.repro");
      ADD_FAILURE() << spec.env << " was accepted";
    } catch (const Error& e) {
      EXPECT_TRUE(has(e.what(), "r.repro:3:1: a repro file may not set " + std::string(spec.env))) << e.what();
    }
  }
  for (Opt id : {Opt::CacheDir, Opt::CacheSizeLimit, Opt::DebugDir, Opt::ReproAfter, Opt::ReproLevel, Opt::Logs})
    EXPECT_FALSE(option_spec(id).repro_settable()) << option_spec(id).env;
}

// The writers: the minifier records only settable options, and a repro with anything else cannot be written.
TEST(ReproOptions, WritersRecordOnlySettableOptions) {
  ScopedOption cache(Opt::CacheDir, "/tmp/elsewhere"), limit(Opt::CacheSizeLimit, "5M"), inject(Opt::Inject, "relu:accuracy");
  std::map<std::string, std::string> config = minify::current_config();
  EXPECT_EQ(config.count("KILN_INJECT"), 1u);
  for (const auto& [name, value] : config) EXPECT_TRUE(option_spec(*find_option(name)).repro_settable()) << name;
  ReproFile r = make_repro(graph::parse_graph(kRelu));
  r.input_seed = 0;
  r.config["KILN_CACHE_DIR"] = "/tmp/elsewhere";
  EXPECT_THROW(print_repro(r), Error);
}

// ---------------------------------------------------------------- 2. the kernel cache

namespace {

// The (object, meta) files of the cache entries under `cache`.
std::vector<std::pair<fs::path, fs::path>> cache_entries(const fs::path& cache) {
  std::vector<std::pair<fs::path, fs::path>> out;
  if (!fs::exists(cache)) return out;
  for (const auto& e : fs::recursive_directory_iterator(cache))
    if (e.path().extension() == ".meta") out.emplace_back(fs::path(e.path()).replace_extension(".o"), e.path());
  return out;
}

}  // namespace

TEST_F(Files, DamagedCacheEntriesAreDiscardedAndRebuilt) {
  std::string g = file("g.kir", kRelu);
  const std::string env = "KILN_LOGS=cache KILN_CACHE_DIR=" + (dir_ / "cache").string();
  cli_test::CliResult first = run_kiln("run --backend inductor --seed 1 " + g, env);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto entries = cache_entries(dir_ / "cache");
  ASSERT_EQ(entries.size(), 1u) << first.output;
  const auto [object, meta] = entries[0];
  const std::string good = cli_test::read_text(object);
  EXPECT_TRUE(has(cli_test::read_text(meta), "object-sha256 " + sha256_hex(good)));
  const std::string values = first.output.substr(first.output.find("output 0"));
  auto damage_and_rerun = [&](const std::string& bytes, const std::string& reason) {
    std::ofstream(object, std::ios::binary | std::ios::trunc) << bytes;
    cli_test::CliResult again = run_kiln("run --backend inductor --seed 1 " + g, env);
    EXPECT_EQ(again.exit_code, 0) << again.output;
    EXPECT_TRUE(has(again.output, "discarding the cache entry")) << again.output;
    EXPECT_TRUE(has(again.output, reason)) << again.output;
    EXPECT_TRUE(has(again.output, values)) << again.output;  // the same numbers as the first run
    EXPECT_EQ(cli_test::read_text(object), good);  // rebuilt
    cli_test::CliResult third = run_kiln("run --backend inductor --seed 1 " + g, env);
    EXPECT_TRUE(has(third.output, "disk hit")) << third.output;  // and used again
  };
  damage_and_rerun(good.substr(0, good.size() / 2), "truncated");  // a killed writer, an old kiln
  damage_and_rerun("", "truncated");                                // disk full
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x5a;
  damage_and_rerun(flipped, "corrupted");                           // bit rot
  // A .meta recording other key material: a hash collision or a stray file is never linked.
  std::string m = cli_test::read_text(meta);
  m.back() ^= 1;
  std::ofstream(meta, std::ios::binary | std::ios::trunc) << m;
  cli_test::CliResult collided = run_kiln("run --backend inductor --seed 1 " + g, env);
  EXPECT_TRUE(has(collided.output, "other key material")) << collided.output;
}

// Kernels are keyed by the build that made them: the `kiln` binary's entry records its build ID (the one
// `kiln --version` prints), and this test binary, another build of the same code generator, compiling the same
// graph into the same directory, makes an entry of its own instead of linking the CLI's object.
TEST_F(Files, KernelsFromAnotherBuildAreNeverLoaded) {
  std::string g = file("g.kir", kRelu);
  const fs::path cache = dir_ / "cache";
  cli_test::CliResult first = run_kiln("run --backend inductor --seed 1 " + g, "KILN_CACHE_DIR=" + cache.string());
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto entries = cache_entries(cache);
  ASSERT_EQ(entries.size(), 1u) << first.output;
  const std::string version = run_kiln("--version").output;
  const size_t at = version.find("Build: build-id ");
  ASSERT_NE(at, std::string::npos) << version;
  const std::string cli_build = version.substr(at + 7, version.find('\n', at) - at - 7);
  EXPECT_TRUE(has(cli_test::read_text(entries[0].second), cli_build)) << cli_test::read_text(entries[0].second);
  EXPECT_NE(cli_build, build_identity());
  ScopedOption dir(Opt::CacheDir, cache.string());
  runtime::KernelJit::instance().forget_memory_cache();
  CompileOptions fresh;
  fresh.use_graph_cache = false;
  compile(graph::parse_graph(kRelu, "g.kir"), fresh);
  EXPECT_EQ(cache_entries(cache).size(), 2u);
}

TEST_F(Files, EvictionDeletesOnlyKilnsOwnEntries) {
  const fs::path cache = dir_ / "cache";
  std::string env = "KILN_LOGS=cache KILN_CACHE_DIR=" + cache.string();
  ASSERT_EQ(run_kiln("run --backend inductor " + file("g.kir", kRelu), env).exit_code, 0);
  auto entries = cache_entries(cache);
  ASSERT_EQ(entries.size(), 1u);
  const fs::path kernels = entries[0].first.parent_path();
  // A temporary file of a writer that was killed (pid 2^22 + 1 is above Linux's pid limit: never running).
  const std::string abandoned = "." + entries[0].first.filename().string() + ".kiln-tmp.4194305.0";
  std::ofstream(kernels / abandoned) << "partial";
  // Files kiln did not write, including ones that look like objects.
  for (const char* f : {"notes.txt", "mine.o", "0000000000000000000000000000000000000000000000000000000000000000.o",
                        "0000000000000000000000000000000000000000000000000000000000000000.meta"})
    std::ofstream(kernels / f) << std::string(4096, 'x');
  cli_test::CliResult r = run_kiln("run --backend inductor " + file("h.kir", "graph h(%x: f32[8]) {\n  %y = neg(%x) : f32[8]\n"
                                                                   "  return %y\n}\n"), env + " KILN_CACHE_SIZE_LIMIT=1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "evict")) << r.output;
  EXPECT_FALSE(fs::exists(entries[0].first));  // kiln's own entries go, and temporary files of dead writers
  EXPECT_FALSE(fs::exists(kernels / abandoned));
  for (const char* f : {"notes.txt", "mine.o", "0000000000000000000000000000000000000000000000000000000000000000.o",
                        "0000000000000000000000000000000000000000000000000000000000000000.meta"})
    EXPECT_TRUE(fs::exists(kernels / f)) << f;
}

// ---------------------------------------------------------------- 3. value names as file names

TEST_F(Files, DumpKeepsEveryInputInsideItsDirectory) {
  // Names that were paths, and a name that was an output's file.
  std::string g = file("g.kir", "graph g(%\"../../x\": f32[3], %\"/abs/x\": f32[3], %output_0: f32[3]) {\n"
                                "  %a = add(%\"../../x\", %\"/abs/x\") : f32[3]\n"
                                "  %b = mul(%a, %output_0) : f32[3]\n  return %b\n}\n");
  fs::create_directories(dir_ / "deep" / "er");
  const fs::path dump = dir_ / "deep" / "er" / "dump";
  cli_test::CliResult first = run_kiln("run --seed 2 " + g + " --dump " + dump.string());
  ASSERT_EQ(first.exit_code, 0) << first.output;
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(dump)) files.insert(e.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"%2E.%2F..%2Fx.npy", "%2Fabs%2Fx.npy", "%6Futput_0.npy", "output_0.npy"}));
  EXPECT_FALSE(fs::exists(dir_ / "deep" / "x.npy"));
  EXPECT_FALSE(fs::exists("/abs/x.npy"));
  // A symlink planted in the dump directory is not written through to a file outside it.
  std::ofstream(dir_ / "precious") << "keep";
  fs::remove(dump / "%6Futput_0.npy");
  fs::create_symlink(dir_ / "precious", dump / "%6Futput_0.npy");
  cli_test::CliResult planted = run_kiln("run --seed 2 " + g + " --dump " + dump.string());
  EXPECT_EQ(planted.exit_code, 2) << planted.output;
  EXPECT_TRUE(has(planted.output, "leads outside")) << planted.output;
  EXPECT_EQ(cli_test::read_text(dir_ / "precious"), "keep");
  fs::remove(dump / "%6Futput_0.npy");
  ASSERT_EQ(run_kiln("run --seed 2 " + g + " --dump " + dump.string()).exit_code, 0);
  // Re-running from the dump computes on the inputs, not on the output.
  cli_test::CliResult again = run_kiln("run " + g + " --inputs " + dump.string());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(again.output.substr(again.output.find("output 0")), first.output.substr(first.output.find("output 0")));
}

// The class: the one mapping is injective, never a path, never a reserved name, and fits a file system.
RC_GTEST_PROP(FileNames, InputFileNamesAreSafeAndInjective, (const std::string& a, const std::string& b)) {
  const std::string fa = graph::input_file_name(a), fb = graph::input_file_name(b);
  RC_ASSERT((a == b) == (fa == fb));
  RC_ASSERT(fa.find('/') == std::string::npos);
  RC_ASSERT(fa.find('\0') == std::string::npos);
  RC_ASSERT(fa[0] != '.');
  RC_ASSERT(fa.size() <= 255u);
  for (size_t k = 0; k < 4; ++k) RC_ASSERT(fa != graph::output_file_name(k));
}

TEST(FileNames, ReservedAndLongNames) {
  EXPECT_EQ(graph::input_file_name("x"), "x.npy");
  EXPECT_EQ(graph::input_file_name("h.1"), "h.1.npy");
  EXPECT_EQ(graph::input_file_name("output_12"), "%6Futput_12.npy");
  EXPECT_EQ(graph::input_file_name("output_"), "output_.npy");
  EXPECT_EQ(graph::input_file_name("%6Futput_0"), "%256Futput_0.npy");
  EXPECT_NE(graph::input_file_name(std::string(300, 'a')), graph::input_file_name(std::string(301, 'a')));
}

// ---------------------------------------------------------------- 4. paths inside files

TEST_F(Files, ConstantFilesStayBesideTheGraph) {
  fs::create_directories(dir_ / "g");
  write_npy((dir_ / "outside.npy").string(), Tensor::from_vector<float>({1, 2}, {2}));
  fs::create_symlink(dir_ / "outside.npy", dir_ / "g" / "link.npy");
  const std::string hash = sha256_hex(std::string("\0\0\x80?\0\0\0@", 8));
  for (const std::string& ref : {std::string("../outside.npy"), (dir_ / "outside.npy").string(), std::string("link.npy")}) {
    std::ofstream(dir_ / "g" / "c.kir") << "graph c() {\n  %c = constant f32[2] npy(\"" << ref << "\") sha256=\""
                                        << hash << "\"\n  return %c\n}\n";
    cli_test::CliResult r = run_kiln("verify " + (dir_ / "g" / "c.kir").string());
    EXPECT_EQ(r.exit_code, 2) << ref << "\n" << r.output;
    EXPECT_TRUE(has(r.output, (dir_ / "g" / "c.kir").string() + ":2:")) << r.output;
    EXPECT_TRUE(has(r.output, "must be relative to the file's directory") || has(r.output, "leaves the file's directory") ||
                has(r.output, "through a symlink")) << r.output;
  }
}

TEST_F(Files, ReproPathsStayBesideTheRepro) {
  for (const std::string& line : {std::string("inputs: npy \"/etc\"\n"), std::string("inputs: npy \"../in\"\n"),
                                  std::string("inputs: npy \"in\"\ninput-hash: \"/etc/passwd\" sha256:00\n"),
                                  std::string("inputs: npy \"in\"\ninput-hash: \"../../etc/passwd\" sha256:00\n")}) {
    std::string r = file("r.repro", repro_text(line));
    cli_test::CliResult out = run_kiln("repro run " + r);
    EXPECT_EQ(out.exit_code, 2) << line << out.output;
    EXPECT_TRUE(has(out.output, r + ":3:1:") || has(out.output, r + ":4:1:")) << out.output;
    EXPECT_FALSE(has(out.output, "root:")) << out.output;  // nothing of /etc/passwd is printed
  }
  // A symlink inside the repro's directory that leads out of it.
  fs::create_directories(dir_ / "in");
  write_npy((dir_ / "x.npy").string(), Tensor::from_vector<float>({1, 2, 3, 4}, {4}));
  fs::create_symlink(dir_ / "x.npy", dir_ / "in" / "x.npy");
  fs::create_directories(dir_ / "sub");
  fs::create_symlink(dir_ / "in", dir_ / "sub" / "in");
  std::ofstream(dir_ / "sub" / "r.repro") << repro_text("inputs: npy \"in\"\n");
  cli_test::CliResult out = run_kiln("repro run " + (dir_ / "sub" / "r.repro").string());
  EXPECT_EQ(out.exit_code, 2) << out.output;
  EXPECT_TRUE(has(out.output, "through a symlink")) << out.output;
}

TEST(ConfinedPath, RefusesEveryWayOut) {
  const fs::path base = fs::temp_directory_path();
  EXPECT_EQ(confined_path(base, "a/b.npy", "f"), base / "a/b.npy");
  EXPECT_EQ(confined_path(base, "./a", "f"), base / "./a");
  for (const char* bad : {"", "/etc/passwd", "..", "../x", "a/../../x", "a/..", "//x"})
    EXPECT_THROW(confined_path(base, bad, "f"), Error) << bad;
}

// ---------------------------------------------------------------- 5. outputs

TEST_F(Files, OutputsNeverReplaceWhatIsNotARegularFile) {
  std::string g = file("g.kir", kRelu);
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  fs::create_directories(dir_ / "a_dir");
  for (const char* target : {"fifo", "a_dir"}) {
    cli_test::CliResult r = run_kiln("minify " + g + " --backend inductor -q -o " + (dir_ / target).string(),
                           "KILN_INJECT=relu:compile_error");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_TRUE(has(r.output, "kiln replaces only regular files")) << r.output;
  }
  struct stat st;
  ASSERT_EQ(::lstat((dir_ / "fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_TRUE(fs::is_directory(dir_ / "a_dir"));
  // Through a symlink too (not /dev/null itself: as root, a regression would replace the machine's device).
  fs::create_symlink(dir_ / "fifo", dir_ / "link");
  EXPECT_THROW(write_file_atomic((dir_ / "link").string(), "x"), Error);
  ASSERT_EQ(::lstat((dir_ / "fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST_F(Files, FmtInPlaceKeepsModeSymlinkAndComments) {
  const std::string messy = "# a model\ngraph g(%x: f32[4]) {   # inputs\n  # the only op\n  %y = relu(%x)  # no type\n"
                            "  return %y\n}\n# end\n";
  std::string real = file("real.kir", messy);
  ::chmod(real.c_str(), 0600);
  fs::create_symlink(real, dir_ / "link.kir");
  cli_test::CliResult r = run_kiln("fmt -i " + (dir_ / "link.kir").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.kir"));
  EXPECT_EQ(fs::status(real).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  const std::string formatted = "# a model\ngraph g(%x: f32[4]) {  # inputs\n  # the only op\n"
                                "  %y = relu(%x) : f32[4]  # no type\n  return %y\n}\n# end\n";
  EXPECT_EQ(cli_test::read_text(real), formatted);
  EXPECT_EQ(run_kiln("fmt " + real).output, formatted);  // idempotent, and what -i writes
  ASSERT_EQ(run_kiln("fmt -i " + real).exit_code, 0);
  EXPECT_EQ(cli_test::read_text(real), formatted);
}

TEST_F(Files, TwoRunsDoNotWriteOneOutput) {
  const std::string out = (dir_ / "m.repro").string();
  OutputLock held(out);  // another kiln is writing it
  cli_test::CliResult r = run_kiln("minify " + file("g.kir", kRelu) + " --backend inductor -q -o " + out,
                         "KILN_INJECT=relu:compile_error");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "another kiln process is writing it")) << r.output;
  EXPECT_FALSE(fs::exists(out));
  cli_test::CliResult dump = run_kiln("run " + (dir_ / "g.kir").string() + " --dump " + out);
  EXPECT_EQ(dump.exit_code, 2) << dump.output;
}

TEST_F(Files, MinifierRemovesOnlyItsOwnInputFiles) {
  const std::string out = (dir_ / "m.repro").string();
  fs::create_directories(out + ".inputs" + "/keep");
  std::ofstream(out + ".inputs/notes.txt") << "mine";
  cli_test::CliResult r = run_kiln("minify " + file("g.kir", "graph g(%x: f32[4], %w: f32[4]) {\n  %a = mul(%x, %w) : f32[4]\n"
                                                      "  %y = relu(%a) : f32[4]\n  return %y\n}\n") +
                                 " --backend inductor -q -o " + out,
                             "KILN_INJECT=relu:compile_error");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(cli_test::read_text(out + ".inputs/notes.txt"), "mine");
  EXPECT_TRUE(fs::is_directory(out + ".inputs/keep"));
  EXPECT_TRUE(fs::exists(out + ".inputs/a.npy")) << r.output;  // the minified graph's input
  EXPECT_FALSE(fs::exists(out + ".inputs/x.npy"));             // an earlier checkpoint's, no longer read
}

TEST_F(Files, FailedWritesLeaveNothingBehind) {
  const std::string target = file("t.txt", "old");
  EXPECT_THROW(write_file_atomic(target, [](const ChunkWriter& w) {
                 w("new", 3);
                 throw Error("disk full");
               }),
               Error);
  EXPECT_EQ(cli_test::read_text(target), "old");
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir_)) ++entries, (void)e;
  EXPECT_EQ(entries, 1);  // no temporary file
  write_file_atomic((dir_ / "new.txt").string(), "x");
  EXPECT_EQ(fs::status(dir_ / "new.txt").permissions() & fs::perms::others_write, fs::perms::none);  // umask applies
}

// ---------------------------------------------------------------- 6. input files

TEST_F(Files, ReadersRefuseDevicesDirectoriesAndHugeFiles) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  std::string big = (dir_ / "big.kir").string();
  ASSERT_EQ(::truncate(file("big.kir", "").c_str(), kMaxTextFileBytes + 1), 0);  // sparse
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/dev/zero", "is a character device"}, {dir_.string(), "is a directory"},
      {(dir_ / "fifo").string(), "is a FIFO"}, {big, "more than the 256 MiB"}};
  for (const auto& [path, message] : cases)
    for (std::string cmd : {"verify ", "fmt ", "run ", "repro run ", "minify -q --backend eager "}) {
      cli_test::CliResult r = run_kiln(cmd + path);
      EXPECT_EQ(r.exit_code, 2) << cmd << path << "\n" << r.output;
      EXPECT_TRUE(has(r.output, message)) << cmd << path << "\n" << r.output;
    }
  // An input directory with a FIFO where an input should be, and one with a symlink to a device.
  fs::create_directories(dir_ / "in");
  ASSERT_EQ(::mkfifo((dir_ / "in" / "x.npy").c_str(), 0600), 0);
  cli_test::CliResult r = run_kiln("run " + file("g.kir", kRelu) + " --inputs " + (dir_ / "in").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "is a FIFO, not a .npy file")) << r.output;
  fs::remove(dir_ / "in" / "x.npy");
  fs::create_symlink("/dev/zero", dir_ / "in" / "x.npy");
  r = run_kiln("run " + (dir_ / "g.kir").string() + " --inputs " + (dir_ / "in").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "leads outside")) << r.output;
}

TEST_F(Files, NpyHeadersCannotClaimMoreThanTheFileHolds) {
  // A 128-byte file whose header claims 2^40 floats: an error, not an allocation failure (exit 3).
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }";
  header += std::string(128 - 10 - header.size() - 1, ' ') + "\n";
  std::string npy = std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) + char(0) + header;
  fs::create_directories(dir_ / "in");
  std::ofstream(dir_ / "in" / "x.npy", std::ios::binary) << npy;
  cli_test::CliResult r = run_kiln("run " + file("g.kir", "graph g(%x: f32[1099511627776]) {\n  return %x\n}\n") + " --inputs " +
                         (dir_ / "in").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "truncated data")) << r.output;
  // A dtype with trailing characters is not read as the dtype it starts with.
  std::string f4 = std::string("\x93NUMPY\x01\x00", 8) + char(118) + char(0) +
                   "{'descr': '<f4x', 'fortran_order': False, 'shape': (1,), }" + std::string(59, ' ') + "\n" +
                   std::string(4, '\0');
  std::ofstream(dir_ / "in" / "x.npy", std::ios::binary | std::ios::trunc) << f4;
  r = run_kiln("run " + file("h.kir", kRelu) + " --inputs " + (dir_ / "in").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "unsupported dtype '<f4x'")) << r.output;
}

// ---------------------------------------------------------------- 7. number fields

TEST_F(Files, MalformedNumbersInReprosAreLocatedErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"inputs: seed abc\n", ":3:1: the input seed 'abc'"},
      {"inputs: seed -1\n", ":3:1: the input seed '-1'"},
      {"inputs: seed 99999999999999999999999\n", ":3:1: the input seed"},
      {"inputs: seed 0\ntolerance: x\n", ":4:1: the tolerance 'x'"},
      {"inputs: seed 0\ntolerance: nan\n", ":4:1: the tolerance 'nan'"},
      {"inputs: seed 0\ntolerance: 1e999\n", ":4:1: the tolerance"},
  };
  for (const auto& [line, message] : cases) {
    std::string r = file("r.repro", repro_text(line));
    cli_test::CliResult out = run_kiln("repro run " + r);
    EXPECT_EQ(out.exit_code, 2) << line << out.output;
    EXPECT_TRUE(has(out.output, r + message)) << out.output;
  }
  std::string r = file("v.repro", "kiln-repro: 1abc\nbackend: eager\ninputs: seed 0\n\n" + std::string(kRelu));
  cli_test::CliResult out = run_kiln("repro run " + r);
  EXPECT_EQ(out.exit_code, 2) << out.output;
  EXPECT_TRUE(has(out.output, r + ":1:1: invalid repro format version '1abc'")) << out.output;
}

TEST_F(Files, MalformedMinifierStateIsAnError) {
  std::string g = file("g.kir", kRelu);
  const std::string out = (dir_ / "m.repro").string();
  const std::string env = "KILN_INJECT=relu:compile_error";
  ASSERT_EQ(run_kiln("minify " + g + " --backend inductor -q -o " + out, env).exit_code, 0);
  std::string state = cli_test::read_text(out + ".state.json");
  for (const std::string& bad : {std::string("[1, 2]"), std::string("\"text\""),
                                 std::string("{\"source_hash\": 5}")}) {
    std::ofstream(out + ".state.json", std::ios::trunc) << bad;
    cli_test::CliResult r = run_kiln("minify " + g + " --backend inductor -q --resume -o " + out, env);
    EXPECT_EQ(r.exit_code, 2) << bad << "\n" << r.output;
    EXPECT_TRUE(has(r.output, "cannot resume")) << r.output;
  }
}

TEST(ParseNumber, WholeFieldsOnly) {
  EXPECT_EQ(parse_number<uint64_t>("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(parse_number<int>("-3"), -3);
  EXPECT_EQ(parse_number<double>("1e-4"), 1e-4);
  for (const char* bad : {"", " 1", "1 ", "+1", "1abc", "0x10", "abc"}) EXPECT_FALSE(parse_number<int>(bad)) << bad;
  EXPECT_FALSE(parse_number<uint64_t>("-1"));
  EXPECT_FALSE(parse_number<uint64_t>("18446744073709551616"));
}

// ---------------------------------------------------------------- 8. the repro fuzzer's seeds

// Each seed of fuzz/corpus/repro is either rejected with a kiln::Error or round-trips (the fuzzer's property).
TEST(ReproFuzzSeeds, RejectedOrRoundTrip) {
  int accepted = 0, rejected = 0;
  for (const auto& e : fs::directory_iterator(fs::path(KILN_SOURCE_DIR) / "fuzz" / "corpus" / "repro")) {
    ReproFile r;
    try {
      r = parse_repro(cli_test::read_text(e.path()), "/nonexistent/fuzz.repro");
    } catch (const Error&) {
      ++rejected;
      continue;
    }
    ++accepted;
    const std::string printed = print_repro(r);
    EXPECT_EQ(print_repro(parse_repro(printed, "/nonexistent/printed.repro")), printed) << e.path();
  }
  EXPECT_GE(accepted, 3);
  EXPECT_GE(rejected, 1);
}

// Input hashes are SHA-256 now; repros written by older kiln (64-bit FNV-1a) still run, and either kind of
// hash catches a changed input file.
TEST_F(Files, ReproInputHashesOldAndNew) {
  fs::create_directories(dir_ / "in");
  write_npy((dir_ / "in" / "x.npy").string(), Tensor::from_vector<float>({1, -2, 3, -4}, {4}));
  const std::string bytes = cli_test::read_text(dir_ / "in" / "x.npy");
  uint64_t fnv = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) fnv = (fnv ^ c) * 0x100000001b3ull;
  EXPECT_EQ(content_hash_of_file((dir_ / "in" / "x.npy").string()), "sha256:" + sha256_hex(bytes));
  for (const std::string& hash : {"sha256:" + sha256_hex(bytes), fmt::format("fnv1a64:{:016x}", fnv)}) {
    std::string r = file("r.repro", repro_text("inputs: npy \"in\"\ninput-hash: \"x.npy\" " + hash + "\n"));
    cli_test::CliResult ok = run_kiln("repro run " + r);
    EXPECT_NE(ok.exit_code, 2) << hash << "\n" << ok.output;  // the hash is accepted and the repro runs
    EXPECT_TRUE(has(ok.output, "recorded failure: none on backend eager")) << ok.output;
  }
  write_npy((dir_ / "in" / "x.npy").string(), Tensor::from_vector<float>({1, -2, 3, 5}, {4}));
  for (const std::string& hash : {"sha256:" + sha256_hex(bytes), fmt::format("fnv1a64:{:016x}", fnv)}) {
    std::string r = file("r.repro", repro_text("inputs: npy \"in\"\ninput-hash: \"x.npy\" " + hash + "\n"));
    cli_test::CliResult changed = run_kiln("repro run " + r);
    EXPECT_EQ(changed.exit_code, 2) << changed.output;
    EXPECT_TRUE(has(changed.output, "the inputs changed since the repro was written")) << changed.output;
  }
}

// The kernel disk cache holds machine code the process runs, so a directory another user could write is never
// read (issue: any local user could plant KEY.o and KEY.meta in the old /tmp fallback and have it run).
TEST_F(Files, ACacheDirectoryOthersCanWriteIsNeverRead) {
  std::string g = file("g.kir", kRelu);
  const fs::path cache = dir_ / "cache";
  const std::string env = "KILN_LOGS=cache KILN_CACHE_DIR=" + cache.string();
  ASSERT_EQ(run_kiln("run --backend inductor --seed 1 " + g, env).exit_code, 0);
  auto entries = cache_entries(cache);
  ASSERT_EQ(entries.size(), 1u);
  cli_test::CliResult trusted = run_kiln("run --backend inductor --seed 1 " + g, env);
  ASSERT_TRUE(has(trusted.output, "disk hit")) << trusted.output;
  const fs::path kernels = entries[0].first.parent_path();
  fs::permissions(kernels, fs::perms::all);  // mode 0777: anyone may plant an entry here
  cli_test::CliResult planted = run_kiln("run --backend inductor --seed 1 " + g, env);
  EXPECT_EQ(planted.exit_code, 0) << planted.output;
  EXPECT_FALSE(has(planted.output, "disk hit")) << planted.output;
  EXPECT_TRUE(has(planted.output, "kiln: warning: the kernel disk cache is off for this process")) << planted.output;
  EXPECT_TRUE(has(planted.output, "is writable by other users (mode 0777)")) << planted.output;
  // A world-writable directory above the cache, without the sticky bit, is refused the same way.
  fs::permissions(kernels, fs::perms::owner_all);
  fs::permissions(cache, fs::perms::all);
  cli_test::CliResult parent = run_kiln("run --backend inductor --seed 1 " + g, env);
  EXPECT_FALSE(has(parent.output, "disk hit")) << parent.output;
  EXPECT_TRUE(has(parent.output, cache.string() + " is writable by other users")) << parent.output;
  // Sticky and world-writable above (as /tmp is): trusted, since no one else can rename the user's entries.
  fs::permissions(cache, fs::perms::all | fs::perms::sticky_bit);
  EXPECT_TRUE(has(run_kiln("run --backend inductor --seed 1 " + g, env).output, "disk hit"));
}

// Debian and Ubuntu give each user a private group and a umask of 002: every directory the user makes is
// group-writable, by that group alone. The cache serves there (CI found it off, and the entries kiln wrote itself
// refused, under such a umask); a group with other members stays refused. Entries are private files whatever
// the umask.
namespace {
bool group_is_private_to_me(gid_t gid) {  // the rule, written here independently of kernel_disk_cache.cpp's
  struct group* gr = ::getgrgid(gid);
  struct passwd* me = ::getpwuid(::geteuid());
  if (!gr || !me) return false;
  const std::string my_name = me->pw_name;
  int members = 0;
  bool only_me = true;
  ::setpwent();
  while (struct passwd* p = ::getpwent())
    if (p->pw_gid == gid) ++members, only_me &= p->pw_uid == ::geteuid();
  ::endpwent();
  for (char** m = gr->gr_mem; m && *m; ++m) ++members, only_me &= my_name == *m;
  return members > 0 && only_me;
}
}  // namespace

TEST_F(Files, UnderUmask002TheCacheServesWhenTheGroupIsTheUsersOwn) {
  std::string g = file("g.kir", kRelu);
  const fs::path cache = dir_ / "cache";
  const std::string env = "umask 002; KILN_LOGS=cache KILN_CACHE_DIR=" + cache.string();
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_all | fs::perms::others_read |
                            fs::perms::others_exec);  // mode 0775, as mkdir makes it under umask 002
  cli_test::CliResult first = run_kiln("run --backend inductor --seed 1 " + g, env);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  struct stat dir_st {};
  ASSERT_EQ(::stat(dir_.c_str(), &dir_st), 0);
  if (!group_is_private_to_me(dir_st.st_gid)) {
    // A group others belong to may plant entries: the cache stays off, with the reason.
    EXPECT_TRUE(has(first.output, dir_.string() + " is writable by other users (mode 0775)")) << first.output;
    EXPECT_TRUE(cache_entries(cache).empty());
    return;
  }
  EXPECT_FALSE(has(first.output, "kernel disk cache is off")) << first.output;
  auto entries = cache_entries(cache);
  ASSERT_EQ(entries.size(), 1u) << first.output;
  for (const fs::path& f : {entries[0].first, entries[0].second}) {
    struct stat st {};
    ASSERT_EQ(::stat(f.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << f;  // not 0664, which the umask alone would give
  }
  fs::permissions(entries[0].first.parent_path(), fs::perms::group_write, fs::perm_options::add);
  cli_test::CliResult second = run_kiln("run --backend inductor --seed 1 " + g, env);
  EXPECT_TRUE(has(second.output, "disk hit")) << second.output;
  EXPECT_FALSE(has(second.output, "kernel disk cache is off")) << second.output;
}

TEST_F(Files, ACacheDirectoryOrEntryOfAnotherUserIsNeverRead) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  std::string g = file("g.kir", kRelu);
  const fs::path cache = dir_ / "cache";
  const std::string env = "KILN_LOGS=cache KILN_CACHE_DIR=" + cache.string();
  ASSERT_EQ(run_kiln("run --backend inductor --seed 1 " + g, env).exit_code, 0);
  auto entries = cache_entries(cache);
  ASSERT_EQ(entries.size(), 1u);
  ASSERT_EQ(::chown(entries[0].first.c_str(), 65534, 65534), 0);  // the object: nobody's
  cli_test::CliResult object = run_kiln("run --backend inductor --seed 1 " + g, env);
  EXPECT_FALSE(has(object.output, "disk hit")) << object.output;
  EXPECT_TRUE(has(object.output, "belongs to another user (uid 65534)")) << object.output;
  EXPECT_TRUE(fs::exists(entries[0].first));  // not deleted either: it is not this user's
  ASSERT_EQ(::chown(entries[0].first.c_str(), 0, 0), 0);
  ASSERT_EQ(::chown(cache.c_str(), 65534, 65534), 0);  // the cache root: nobody's
  cli_test::CliResult root = run_kiln("run --backend inductor --seed 1 " + g, env);
  EXPECT_FALSE(has(root.output, "disk hit")) << root.output;
  EXPECT_TRUE(has(root.output, cache.string() + " belongs to another user (uid 65534)")) << root.output;
}

// Without HOME, XDG_CACHE_HOME and KILN_CACHE_DIR (cron, systemd units, containers) the cache is never the shared
// /tmp/kiln-cache: it is the passwd entry's home, or off.
TEST_F(Files, WithoutHomeTheCacheIsNeverASharedPath) {
  std::string g = file("g.kir", kRelu);
  cli_test::CliResult r =
      run_kiln("run --backend inductor " + g, "env -u HOME -u XDG_CACHE_HOME -u KILN_CACHE_DIR KILN_LOGS=cache");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(has(r.output, "/tmp/kiln-cache")) << r.output;
  std::vector<char> buf(16384);
  struct passwd pw, *found = nullptr;
  if (getpwuid_r(geteuid(), &pw, buf.data(), buf.size(), &found) == 0 && found)
    EXPECT_TRUE(has(r.output, std::string(found->pw_dir) + "/.cache/kiln/")) << r.output;
}
