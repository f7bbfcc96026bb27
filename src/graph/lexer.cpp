// The .kir lexer (lexer.h): tokens, comments kept aside for `kiln fmt`, and every malformed token an error
// at its line and column.
#include "graph/lexer.h"

#include "graph/printer.h"

namespace kiln::graph::kir {

std::string printable_char(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  return u < 0x20 || u >= 0x7f ? fmt::format("\\x{:02x}", u) : std::string(1, c);
}

std::string describe(const Token& t) {
  auto clip = [](std::string_view s) { return s.size() > 24 ? std::string(s.substr(0, 24)) + "..." : std::string(s); };
  switch (t.kind) {
    case Tok::End: return "the end of the file";
    case Tok::Ident: return fmt::format("'{}'", clip(t.text));
    case Tok::Value: return clip(name_ref(t.text));
    case Tok::Int:
    case Tok::Float: return fmt::format("the number {}", clip(t.text));
    case Tok::String: return fmt::format("the string {}", clip(quote(t.text)));
    case Tok::Punct: return fmt::format("'{}'", t.text);
  }
  return "?";
}

Token Lexer::next() {
  skip_space_and_comments();
  Token t;
  t.line = line_;
  t.col = col_;
  last_token_line_ = line_;
  if (done()) return t;
  char c = cur();
  if (is_ident_start(c)) {
    t.kind = Tok::Ident;
    const size_t start = pos_;
    span(is_ident_char);
    // A custom op's namespaced name (ops/custom.h): mylib::scale.
    while (at(0) == ':' && at(1) == ':' && is_ident_start(at(2))) {
      take(), take();
      span(is_ident_char);
    }
    t.text = src_.substr(start, pos_ - start);
  } else if (is_digit(c)) {
    number(t);
  } else if (c == '%') {
    take();
    t.kind = Tok::Value;
    if (!done() && cur() == '"') {
      take();
      t.text = string_body(t.line, t.col);
    } else {
      t.text = span(is_name_char);
    }
    if (t.text.empty()) {
      fail(t.line, t.col, "expected a value name after '%'; names are letters, digits, '_' and '.', or a "
                          "non-empty quoted string such as %\"my value\"");
    }
  } else if (c == '"') {
    take();
    t.kind = Tok::String;
    t.text = string_body(t.line, t.col);
  } else if (std::string_view("()[]{},=:@-").find(c) != std::string_view::npos) {
    t.kind = Tok::Punct;
    t.text = src_.substr(pos_, 1);
    take();
  } else {
    fail(t.line, t.col, fmt::format("unexpected character '{}'; see docs/kir-format.md for the syntax",
                                    printable_char(c)));
  }
  return t;
}

void Lexer::skip_space_and_comments() {
  while (!done()) {
    char c = cur();
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') take();
    else if (c == '#') {
      Comment comment{line_, line_ == last_token_line_, ""};
      size_t start = pos_;
      while (!done() && cur() != '\n') take();
      comment.text = std::string(src_.substr(start, pos_ - start));
      while (!comment.text.empty() && (comment.text.back() == ' ' || comment.text.back() == '\t' ||
                                       comment.text.back() == '\r'))
        comment.text.pop_back();
      comments_.push_back(std::move(comment));
    }
    else break;
  }
}

void Lexer::number(Token& t) {
  size_t start = pos_;
  t.kind = Tok::Int;
  span(is_digit);
  if (at(0) == '.' && is_digit(at(1))) {
    t.kind = Tok::Float;
    take();
    span(is_digit);
  }
  if (at(0) == 'e' || at(0) == 'E') {
    size_t k = (at(1) == '+' || at(1) == '-') ? 2 : 1;
    if (!is_digit(at(k))) fail(t.line, t.col, "malformed number: the exponent needs digits, as in 1e-5");
    t.kind = Tok::Float;
    for (size_t i = 0; i < k; ++i) take();
    span(is_digit);
  }
  t.text = src_.substr(start, pos_ - start);
  if (!done() && (is_name_char(cur())))
    fail(t.line, t.col, fmt::format("malformed number '{}{}'; numbers look like 3, -2, 0.5, 1e-05, inf or nan",
                                    t.text, printable_char(cur())));
}

std::string_view Lexer::string_body(int line, int col) {
  size_t start = pos_;
  std::string out;
  bool escaped = false;
  while (true) {
    if (done() || cur() == '\n')
      fail(line, col, "unterminated string; close it with '\"' on the same line");
    char c = take();
    if (c == '"') break;
    if (c == '\\') {
      if (!escaped) out.assign(src_.substr(start, pos_ - 1 - start));
      escaped = true;
      int el = line_, ec = col_ - 1;
      if (done()) fail(line, col, "unterminated string; close it with '\"' on the same line");
      char e = take();
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'x': {
          auto hex = [](char h) { return is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                                                               : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1; };
          int hi = hex(at(0)), lo = hex(at(1));
          if (hi < 0 || lo < 0)
            fail(el, ec, "bad escape '\\x': it needs two hex digits, as in \\x0a");
          take(), take();
          out += char(hi * 16 + lo);
          break;
        }
        default:
          fail(el, ec, fmt::format("bad escape '\\{}' in a string; the escapes are \\\\ \\\" \\n \\t \\r and \\xHH",
                                   printable_char(e)));
      }
    } else if (static_cast<unsigned char>(c) < 0x20) {
      fail(line_, col_ - 1, "control character in a string; write it as an escape such as \\x01");
    } else if (escaped) {
      out += c;
    }
  }
  if (!escaped) return src_.substr(start, pos_ - 1 - start);
  strings_.push_back(std::move(out));
  return strings_.back();
}

}  // namespace kiln::graph::kir
