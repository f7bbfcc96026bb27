// Tests of the output-sink escaping (src/core/escape.h): a shell word reads back as the string it quotes, and no
// terminal, Markdown, XML or JSON sink receives a control byte or invalid UTF-8 from a name.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/escape.h"

using namespace kiln;

namespace {

// What `sh -c "printf %s WORD"` prints: the string the shell reads back from the word.
std::string shell_reads_back(const std::string& word) {
  std::string command = "printf %s " + word;
  std::string line = "sh -c " + shell_quote(command);
  FILE* p = popen(line.c_str(), "r");
  std::string out;
  char buf[256];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  int status = pclose(p);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << line;
  return out;
}

bool has_raw_control(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if ((c < 0x20 && c != '\n') || c == 0x7f) return true;
    if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) < 0xa0) return true;
  }
  return false;
}

}  // namespace

TEST(ShellQuote, APastedCommandSubstitutionIsOnlyText) {
  const std::string name = "s/$(touch PWNED).kir";
  EXPECT_EQ(shell_reads_back(shell_quote(name)), name);
  EXPECT_EQ(shell_quote("examples/chain100.kir"), "examples/chain100.kir");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_reads_back(shell_quote("it's")), "it's");
}

TEST(ShellQuote, ControlBytesNeverAppearRawInTheCommand) {
  const std::string name = "a\x1b]0;owned\x07" "b\xff" "c";
  const std::string word = shell_quote(name);
  EXPECT_FALSE(has_raw_control(word)) << word;
  EXPECT_EQ(shell_reads_back(word), name);
}

RC_GTEST_PROP(ShellQuote, EveryStringReadsBackExactly, (std::string s)) {
  s.erase(std::remove(s.begin(), s.end(), '\0'), s.end());  // a C string cannot hold NUL
  RC_ASSERT(shell_reads_back(shell_quote(s)) == s);
}

RC_GTEST_PROP(TerminalSafe, NoControlByteOrInvalidUtf8Survives, (std::string s)) {
  const std::string safe = terminal_safe(s);
  RC_ASSERT(is_valid_utf8(safe));
  RC_ASSERT(safe.find('\n') == std::string::npos);
  RC_ASSERT(!has_raw_control(safe));
}

TEST(TerminalSafe, KeepsUnicodeAndEscapesTheRest) {
  EXPECT_EQ(terminal_safe("größe"), "größe");
  EXPECT_EQ(terminal_safe("a\x1b[31mb"), "a\\x1b[31mb");
  EXPECT_EQ(terminal_safe("\xc2\x9b" "2J"), "\\xc2\\x9b2J");  // C1 CSI
  EXPECT_EQ(terminal_safe("\xff"), "\\xff");
}

TEST(MarkdownCode, AFenceLongerThanAnyBacktickRunInside) {
  EXPECT_EQ(markdown_code("x"), "`x`");
  EXPECT_EQ(markdown_code("a`b"), "``a`b``");
  EXPECT_EQ(markdown_code("`a"), "`` `a ``");
  EXPECT_EQ(markdown_code("a\nb"), "`a\\x0ab`");
}

RC_GTEST_PROP(XmlEscape, IsWellFormedText, (std::string s)) {
  const std::string x = xml_escape(s);
  RC_ASSERT(is_valid_utf8(x));
  for (unsigned char c : x) RC_ASSERT(c >= 0x20 || c == '\n' || c == '\t' || c == '\r');
  RC_ASSERT(x.find('<') == std::string::npos);
}

RC_GTEST_PROP(Utf8Lossless, NlohmannDumpsEveryName, (std::string s)) {
  nlohmann::json j = utf8_lossless(s);
  RC_ASSERT(!j.dump().empty());
  if (is_valid_utf8(s)) RC_ASSERT(j.get<std::string>() == s);
}
