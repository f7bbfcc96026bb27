// The .kir lexer (grammar: docs/kir-format.md), internal to src/graph: the tokens the parser (parse.cpp) and
// `kiln fmt`'s comment placement (print_keeping_comments.cpp) read, and the character classes that decide which
// names the printer (print.cpp) may write bare. A token views the source, or the lexer's store of unescaped
// strings, so tokens copy cheaply; a malformed token is a kiln::Error "file:line:col: what is wrong; what to do".
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace kiln::graph::kir {

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
inline bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }
inline bool is_name_char(char c) { return is_ident_char(c) || c == '.'; }

enum class Tok : uint8_t { End, Ident, Value, Int, Float, String, Punct };

struct Token {
  Tok kind = Tok::End;
  // The identifier, value name, number lexeme, unescaped string or punctuation character: a view of the source,
  // or of the lexer's store of unescaped strings (both outlive the parse), so tokens copy cheaply.
  std::string_view text;
  int line = 0, col = 0;
  bool is(char p) const { return kind == Tok::Punct && text[0] == p; }
  bool is_word(std::string_view w) const { return kind == Tok::Ident && text == w; }
};

// `c` as an error message shows it: itself, or \xHH for a control or non-ASCII byte.
std::string printable_char(char c);
// A token as an error message names it: "'graph'", "%x", "the number 3", "the end of the file".
std::string describe(const Token& t);

class Lexer {
 public:
  Lexer(std::string_view src, const std::string& file) : src_(src), file_(file) {}
  // A comment the lexer skipped: its line, whether code precedes it on that line, and its text from '#'.
  struct Comment {
    int line;
    bool trailing;
    std::string text;
  };
  const std::vector<Comment>& comments() const { return comments_; }

  [[noreturn]] void fail(int line, int col, const std::string& msg) const {
    throw Error(fmt::format("{}:{}:{}: {}", file_, line, col, msg));
  }

  // The next token (kind End at the end of the source), comments skipped and kept in comments().
  Token next();

 private:
  bool done() const { return pos_ >= src_.size(); }
  char cur() const { return src_[pos_]; }
  char at(size_t k) const { return pos_ + k < src_.size() ? src_[pos_ + k] : ' '; }
  char take() {
    char c = src_[pos_++];
    if (c == '\n') ++line_, col_ = 1;
    else ++col_;
    return c;
  }
  // The longest run of characters satisfying `pred` (which excludes newlines), consumed.
  template <class Pred>
  std::string_view span(Pred pred) {
    size_t start = pos_;
    while (!done() && pred(cur())) ++pos_;
    col_ += int(pos_ - start);
    return src_.substr(start, pos_ - start);
  }

  void skip_space_and_comments();
  // digits ['.' digits] [('e'|'E') ['+'|'-'] digits]; a sign is a separate '-' token.
  void number(Token& t);
  // The body of a string after its opening quote, unescaped; a view of the source when it has no escapes.
  std::string_view string_body(int line, int col);

  std::string_view src_;
  const std::string& file_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
  int last_token_line_ = 0;
  std::vector<Comment> comments_;
  std::deque<std::string> strings_;  // unescaped strings that tokens view (a deque keeps them in place)
};

}  // namespace kiln::graph::kir
