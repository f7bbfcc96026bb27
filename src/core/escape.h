// Escaping for every sink an untrusted string reaches: a shell line, a terminal, Markdown, HTML, XML and JSON.
// One owner for each rule: graph names, value names, file names and option values come from users' files, so
// every command that prints or writes them goes through these functions (docs/architecture.md, "Output sinks
// and trust").
#pragma once
#include <string>
#include <string_view>

namespace kiln {

// One POSIX shell word that `sh -c` reads back as exactly `s`: bare when every byte is in a safe set, else
// single-quoted ('\'' for a quote). Control bytes and bytes that are not UTF-8 are written as
// "$(printf '\NNN')" pieces, so a pasted command holds no raw terminal escape; a newline stays inside the quotes.
std::string shell_quote(std::string_view s);

// `s` safe to print on a terminal: valid UTF-8 passes through; C0 and C1 control characters, DEL, and bytes that
// are not UTF-8 are written as \xNN (and a backslash as itself), so no name can move the cursor, retitle the
// window or change colours.
std::string terminal_safe(std::string_view s);

// terminal_safe on each line of `s`, the newlines kept: for multi-line text such as an error message that lists
// several problems.
std::string terminal_safe_lines(std::string_view s);

// `s` as a Markdown code span: terminal_safe text between backtick runs longer than any run inside it.
std::string markdown_code(std::string_view s);

// `s` for HTML text and double-quoted attribute values (& < > " '), made terminal_safe first.
std::string html_escape(std::string_view s);

// `s` for XML 1.0 text and attributes: & < > " ' as entities; the characters XML 1.0 cannot hold at all (C0
// controls but tab, newline and carriage return; bytes that are not UTF-8) as the text \xNN.
std::string xml_escape(std::string_view s);

// `s` as valid UTF-8 for a JSON string: unchanged when it already is; otherwise each byte that is not part of a
// UTF-8 sequence becomes the text \xNN. nlohmann::json's dump throws on invalid UTF-8, so every name that goes
// into a JSON document passes through this first.
std::string utf8_lossless(std::string_view s);

// Whether `s` is valid UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF).
bool is_valid_utf8(std::string_view s);

}  // namespace kiln
