// KILN_INJECT's one typed spec (core/inject.h): what it parses an entry into, what each stage asks of it, and the
// messages of a spec the compiler does not take.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/inject.h"
#include "core/options.h"

namespace kiln {
namespace {

TEST(InjectSpec, EntriesAreTypedAndAskedByTargetAndKind) {
  ScopedOption inject(Opt::Inject, "relu:accuracy,fusion:accuracy,var:decomposition,exp:hang");
  InjectSpec s = InjectSpec::from_options();
  ASSERT_EQ(s.entries.size(), 4u);
  EXPECT_TRUE(s.kind_for("relu") == InjectKind::Accuracy);
  EXPECT_TRUE(s.wants("fusion", InjectKind::Accuracy));
  EXPECT_TRUE(s.wants("var", InjectKind::Decomposition));
  EXPECT_FALSE(s.wants("var", InjectKind::Accuracy));
  EXPECT_FALSE(s.wants("partition", InjectKind::Accuracy));
  EXPECT_FALSE(s.kind_for("sin").has_value());
  EXPECT_EQ(s.index_of("var"), 2);
  EXPECT_EQ(s.index_of("sin"), -1);
  EXPECT_EQ(s.str(), "relu:accuracy,fusion:accuracy,var:decomposition,exp:hang");
}

TEST(InjectSpec, EveryKindHasOneNameAndTheEntryFormListsThemAll) {
  for (InjectKind k : {InjectKind::CompileError, InjectKind::RuntimeError, InjectKind::Crash, InjectKind::Accuracy,
                       InjectKind::Decomposition, InjectKind::Hang, InjectKind::Vjp}) {
    EXPECT_TRUE(find_inject_kind(inject_kind_name(k)) == k) << inject_kind_name(k);
    EXPECT_NE(inject_entry_form().find(inject_kind_name(k)), std::string::npos) << inject_kind_name(k);
  }
  EXPECT_EQ(inject_entry_form(), "op:kind (kinds: compile_error, runtime_error, crash, accuracy, decomposition, hang, vjp)");
  EXPECT_FALSE(compiler_takes(InjectKind::Hang));
  EXPECT_TRUE(compiler_takes(InjectKind::Vjp));
}

TEST(InjectSpec, TheCompilerRefusesKindsOnlyInjectTestTakes) {
  {
    ScopedOption inject(Opt::Inject, "relu:hang");
    EXPECT_TRUE(InjectSpec::from_options().kind_for("relu") == InjectKind::Hang);  // inject_test's reading
    try {
      InjectSpec::for_compiler();
      FAIL() << "hang accepted by the compiler";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("KILN_INJECT: unknown kind 'hang' in 'relu:hang' (kinds: compile_error, "
                                           "runtime_error, crash, accuracy, decomposition, vjp; and fusion:accuracy, "
                                           "partition:accuracy)"), std::string::npos) << e.what();
    }
  }
  {
    ScopedOption inject(Opt::Inject, "fusion:crash");
    try {
      InjectSpec::for_compiler();
      FAIL() << "fusion:crash accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("KILN_INJECT: fusion supports only the kind accuracy, got 'crash'"),
                std::string::npos) << e.what();
    }
  }
  ScopedOption inject(Opt::Inject, "relu:crash,partition:accuracy,sin:vjp");
  EXPECT_EQ(InjectSpec::for_compiler().entries.size(), 3u);
}

}  // namespace
}  // namespace kiln
