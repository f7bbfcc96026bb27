// The failure layer (repro/failure.h): FailureKind names at the file boundary, the same-failure rules with
// their options, the child-to-parent encoding, and the classification of an isolated child's result.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>

#include "core/error.h"
#include "repro/failure.h"
#include "repro/isolate.h"
#include "repro/repro.h"

namespace kiln {
namespace {

const FailureKind kRecordable[] = {FailureKind::None,  FailureKind::CompileError, FailureKind::RuntimeError,
                                   FailureKind::Crash, FailureKind::Hang,         FailureKind::Accuracy};

TEST(FailureKind, NamesRoundTripAndUnknownNamesAreClearErrors) {
  for (FailureKind k : kRecordable) EXPECT_EQ(parse_failure_kind(failure_kind_name(k), "test"), k);
  EXPECT_EQ(failure_kind_name(FailureKind::CompileError), "compile_error");
  EXPECT_EQ(fmt::format("{}", FailureKind::Accuracy), "accuracy");
  for (const char* bad : {"segfault", "", "Crash", "invalid"}) {
    try {
      parse_failure_kind(bad, "r.repro:12:1: failure");
      FAIL() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("r.repro:12:1: failure: unknown failure kind '{}' (valid: none, "
                                                        "compile_error, runtime_error, crash, hang, accuracy)", bad)),
                std::string::npos) << e.what();
    }
  }
}

TEST(FailureKind, AReproWithAnUnknownKindIsAnErrorAtItsLine) {
  std::string text = "kiln-repro: 1\nbackend: eager\nfailure: segfault\n\ngraph main(%x: f32[2]) {\n  return %x\n}\n";
  try {
    parse_repro(text, "r.repro");
    FAIL() << "parsed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("r.repro:3:1: failure: unknown failure kind 'segfault'"), std::string::npos)
        << e.what();
  }
}

TEST(SameFailure, RulesAndTheirOptions) {
  FailureSignature segv{FailureKind::Crash, "Segmentation fault"}, abrt{FailureKind::Crash, "Aborted"};
  EXPECT_TRUE(same_failure(segv, abrt));  // kiln repro run: any crash (a pending repro records no signal)
  EXPECT_FALSE(same_failure(segv, abrt, {.check_str = "", .signal_must_match = true}));
  EXPECT_TRUE(same_failure(segv, segv, {.check_str = "", .signal_must_match = true}));
  FailureSignature a{FailureKind::CompileError, "relu: bad IR at %v3"}, b{FailureKind::CompileError, "exp: other"};
  EXPECT_FALSE(same_failure(a, b));
  EXPECT_TRUE(same_failure(a, FailureSignature{FailureKind::CompileError, "relu: bad IR at %v17"}));
  EXPECT_TRUE(same_failure(a, b, {.check_str = "other", .signal_must_match = false}));
  EXPECT_FALSE(same_failure(a, b, {.check_str = "relu", .signal_must_match = false}));
  EXPECT_FALSE(same_failure(FailureSignature{FailureKind::Hang, ""}, FailureSignature{FailureKind::Crash, ""}));
  EXPECT_TRUE(same_failure(FailureSignature{FailureKind::Accuracy, "x"}, FailureSignature{FailureKind::Accuracy, "y"}));
}

RC_GTEST_PROP(FailureEncoding, DecodeInvertsEncode, ()) {
  const auto kind = *rc::gen::element(FailureKind::None, FailureKind::CompileError, FailureKind::RuntimeError,
                                      FailureKind::Crash, FailureKind::Hang, FailureKind::Accuracy,
                                      FailureKind::Invalid);
  const std::string message = *rc::gen::arbitrary<std::string>();
  const std::string stage = *rc::gen::element<std::string>("", "inductor/codegen", "inductor/lowering");
  FailureSignature back = decode_failure(encode_failure({kind, message, stage}));
  RC_ASSERT(back.kind == kind);
  RC_ASSERT(back.message == message);
  RC_ASSERT(back.stage == stage);
}

TEST(FailureEncoding, AnUnknownKindFromAChildIsAnError) {
  EXPECT_THROW(decode_failure("ran\n3"), Error);
}

TEST(Classify, AnIsolatedResultBecomesItsFailure) {
  IsolatedResult r;
  r.kind = FailureKind::Crash;
  r.payload = "Segmentation fault";
  EXPECT_EQ(classify(r).kind, FailureKind::Crash);
  EXPECT_EQ(classify(r).message, "Segmentation fault");
  r.kind = FailureKind::RuntimeError;
  r.payload = "boom";
  EXPECT_EQ(classify(r).kind, FailureKind::RuntimeError);
  r.kind = FailureKind::None;
  r.payload = encode_failure({FailureKind::CompileError, "bad", "inductor/codegen"});
  EXPECT_EQ(classify(r).kind, FailureKind::CompileError);
  EXPECT_EQ(classify(r).stage, "inductor/codegen");
  EXPECT_EQ(classify(run_isolated([]() -> std::string { throw Error("thrown"); }, 30)).kind, FailureKind::RuntimeError);
}

// A crashing child is a crash verdict and leaves no core file behind, even where the user's shell allows core
// dumps (systemd services and many CI runners do): the dump lands in the working directory, which kiln was not
// asked to write, and under load it outlasted the time limit (the crash became a hang).
TEST(Isolation, ACrashingChildWritesNoCoreFile) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_CORE, &saved), 0);
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < (64u << 20)) GTEST_SKIP() << "core dumps are capped here";
  rlimit allow = saved;
  allow.rlim_cur = saved.rlim_max;
  ASSERT_EQ(::setrlimit(RLIMIT_CORE, &allow), 0);
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kiln_core_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path before = fs::current_path();
  fs::current_path(dir);
  IsolatedResult r = run_isolated([]() -> std::string {
    ::raise(SIGSEGV);
    return "";
  }, 30);
  fs::current_path(before);
  ::setrlimit(RLIMIT_CORE, &saved);
  EXPECT_EQ(r.kind, FailureKind::Crash) << r.payload;
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_TRUE(fs::is_empty(dir)) << "the child wrote " << fs::directory_iterator(dir)->path();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln
