// Escaping for output sinks (escape.h).
#include "core/escape.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln {

namespace {

// The length of the valid UTF-8 sequence starting at s[i], or 0 when s[i] does not start one.
size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if ((c & 0xe0) == 0xc0) n = 2, cp = c & 0x1f;
  else if ((c & 0xf0) == 0xe0) n = 3, cp = c & 0x0f;
  else if ((c & 0xf8) == 0xf0) n = 4, cp = c & 0x07;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

// Whether the UTF-8 sequence of length n at s[i] is a C1 control character (U+0080 to U+009F).
bool is_c1_control(std::string_view s, size_t i, size_t n) {
  return n == 2 && static_cast<unsigned char>(s[i]) == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0;
}

void append_hex_byte(std::string& out, unsigned char c) { out += fmt::format("\\x{:02x}", c); }

}  // namespace

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string shell_quote(std::string_view s) {
  constexpr std::string_view kSafe =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=,%@+";
  if (!s.empty() && s.find_first_not_of(kSafe) == std::string_view::npos) return std::string(s);
  std::string out;
  bool in_quotes = false;
  const auto open = [&] { if (!in_quotes) out += '\'', in_quotes = true; };
  const auto close = [&] { if (in_quotes) out += '\'', in_quotes = false; };
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = utf8_sequence_length(s, i);
    bool raw_byte = n == 0 || (c < 0x20 && c != '\n') || c == 0x7f || is_c1_control(s, i, n);
    if (raw_byte) {
      if (n == 0) n = 1;
      close();
      out += "\"$(printf '";
      for (size_t k = 0; k < n; ++k) out += fmt::format("\\{:03o}", static_cast<unsigned char>(s[i + k]));
      out += "')\"";
    } else if (c == '\'') {
      close();
      out += "\\'";
    } else {
      open();
      out.append(s.substr(i, n));
    }
    i += n;
  }
  if (out.empty()) return "''";
  close();
  return out;
}

std::string terminal_safe(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = utf8_sequence_length(s, i);
    if (n == 0 || c < 0x20 || c == 0x7f || is_c1_control(s, i, n)) {
      if (n == 0) n = 1;
      for (size_t k = 0; k < n; ++k) append_hex_byte(out, static_cast<unsigned char>(s[i + k]));
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
  return out;
}

std::string terminal_safe_lines(std::string_view s) {
  std::string out;
  for (size_t start = 0; start <= s.size();) {
    const size_t end = std::min(s.find('\n', start), s.size());
    out += terminal_safe(s.substr(start, end - start));
    if (end == s.size()) break;
    out += '\n';
    start = end + 1;
  }
  return out;
}

std::string markdown_code(std::string_view s) {
  const std::string text = terminal_safe(s);
  size_t longest = 0, run = 0;
  for (char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(longest + 1, '`');
  // A space inside the fence when the text starts or ends with a backtick (CommonMark strips one of each).
  const bool pad = !text.empty() && (text.front() == '`' || text.back() == '`');
  return fence + (pad ? " " : "") + text + (pad ? " " : "") + fence;
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : terminal_safe(s)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string xml_escape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = utf8_sequence_length(s, i);
    if (n == 0 || (c < 0x20 && c != '\n' && c != '\t' && c != '\r')) {
      append_hex_byte(out, c);
      i += 1;
      continue;
    }
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out.append(s.substr(i, n));
    }
    i += n;
  }
  return out;
}

std::string utf8_lossless(std::string_view s) {
  if (is_valid_utf8(s)) return std::string(s);
  std::string out;
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_sequence_length(s, i);
    if (n == 0) {
      append_hex_byte(out, static_cast<unsigned char>(s[i]));
      i += 1;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace kiln
