// The .kir text format (grammar: docs/kir-format.md): the printer, a hand-written lexer and recursive-descent
// parser that turns every malformed input into a kiln::Error "file:line:col: what is wrong; what to do", and
// the verifier that re-infers every node of a graph (the parser runs the same node check as it reads each node,
// so parsing infers each node once). parse_graph(print_graph(g)) reproduces g exactly. Both run once per node of
// every graph a tool loads, so they avoid per-node temporaries: tokens view the source, names resolve through
// the graph's flat name index, and error messages are only built when a check fails.
#include "graph/text.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <unistd.h>
#include <unordered_map>
#include <unordered_set>

#include "core/files.h"
#include "core/hash.h"
#include "eager/npy.h"
#include "ops/api.h"
#include "ops/dispatch.h"

namespace kiln::graph {
namespace {

constexpr int64_t kMaxElements = int64_t(1) << 40;  // larger tensors are treated as malformed input
constexpr int kMaxRank = 64;
constexpr int kMaxDeviceIndex = 1024;
constexpr std::string_view kDTypeList = "bool, u8, i8, i16, i32, i64, f16, bf16, f32, f64";

// Multiplies `numel` (at least 1) by max(size, 1); false when that would exceed 2^40 elements.
bool grow_numel(int64_t& numel, int64_t size) {
  int64_t s = std::max<int64_t>(size, 1);
  if (s > kMaxElements / numel) return false;
  numel *= s;
  return true;
}

// What makes a meta unrepresentable in a .kir type (beyond the limits above), or "".
std::string meta_problem(const TensorMeta& m) {
  if (m.sizes.size() > size_t(kMaxRank)) return fmt::format("{} dimensions (the limit is {})", m.sizes.size(), kMaxRank);
  if (m.strides.size() != m.sizes.size()) return fmt::format("{} strides for {} sizes", m.strides.size(), m.sizes.size());
  int64_t numel = 1;
  for (int64_t s : m.sizes)
    if (s < 0 || !grow_numel(numel, s)) return fmt::format("sizes {}, more than 2^40 elements", shape_str(m.sizes));
  for (int64_t s : m.strides)
    if (s < 0 || s > kMaxElements) return fmt::format("strides {} outside 0..2^40", shape_str(m.strides));
  return "";
}

// The hash recorded for a constant: SHA-256 of its elements in row-major order (numpy: arr.tobytes()).
std::string tensor_sha256(const Tensor& t) {
  Tensor c = t.is_contiguous() ? t : contiguous(t);
  return sha256_hex(c.data_ptr(), size_t(c.numel() * dtype_size(c.dtype())));
}

// ---------------------------------------------------------------- printing
// The printer appends to one string (no temporary strings per argument or type), so printing is linear in the
// output size with few allocations.

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }
bool is_name_char(char c) { return is_ident_char(c) || c == '.'; }

void append_quoted(std::string& out, std::string_view s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) fmt::format_to(std::back_inserter(out), "\\x{:02x}", c);
        else out += char(c);
    }
  }
  out += '"';
}

std::string quote(std::string_view s) {
  std::string out;
  append_quoted(out, s);
  return out;
}

void append_name_ref(std::string& out, std::string_view name) {
  out += '%';
  if (!name.empty() && std::all_of(name.begin(), name.end(), is_name_char)) out += name;
  else append_quoted(out, name);
}

std::string name_ref(std::string_view name) {
  std::string out;
  append_name_ref(out, name);
  return out;
}

std::string graph_name_str(std::string_view name) {
  bool bare = !name.empty() && is_ident_start(name[0]) && std::all_of(name.begin(), name.end(), is_ident_char);
  return bare ? std::string(name) : quote(name);
}

void append_value_ref(std::string& out, const Graph& g, ValueId id) {
  if (id < 0 || id >= g.num_values()) fmt::format_to(std::back_inserter(out), "%<undefined value #{}>", id);
  else append_name_ref(out, g.value(id).name);
}

std::string value_ref(const Graph& g, ValueId id) {
  std::string out;
  append_value_ref(out, g, id);
  return out;
}

void append_int(std::string& out, int64_t v) {
  fmt::format_int f(v);
  out.append(f.data(), f.size());
}

void append_ints(std::string& out, const std::vector<int64_t>& v) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    append_int(out, v[i]);
  }
}

// Whether `m` has the contiguous (row-major) strides of its sizes, which a type does not spell out. Computed
// without allocating, and without overflow for any sizes a graph in memory may hold.
bool has_contiguous_strides(const TensorMeta& m) {
  if (m.strides.size() != m.sizes.size()) return false;
  int64_t expected = 1;
  for (size_t i = m.sizes.size(); i-- > 0;) {
    if (m.strides[i] != expected) return false;
    if (i > 0 && __builtin_mul_overflow(expected, std::max<int64_t>(m.sizes[i], 1), &expected)) return false;
  }
  return true;
}

void append_type(std::string& out, const TensorMeta& m) {
  out += dtype_name(m.dtype);
  out += '[';
  append_ints(out, m.sizes);
  out += ']';
  if (!has_contiguous_strides(m)) {
    out += '{';
    append_ints(out, m.strides);
    out += '}';
  }
  if (!(m.device == Device{})) {
    out += '@';
    out += m.device.str();
  }
}

std::string type_str(const TensorMeta& m) {
  std::string out;
  append_type(out, m);
  return out;
}

void append_markers(std::string& out, const ValueInfo& v) {
  if (v.requires_grad) out += " grad";
  if (v.wrapped_number) out += " wrapped";
}

// Shortest text that reads back as the same value; always marked as a float ("1.0", "1e+20").
std::string float_str(double v, bool single) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = single ? fmt::format("{}", float(v)) : fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string element_str(const Tensor& t, int64_t i) {
  const void* base = t.data_ptr();
  switch (t.dtype()) {
    case DType::Bool: return static_cast<const bool*>(base)[i] ? "True" : "False";
    case DType::U8: return std::to_string(static_cast<const uint8_t*>(base)[i]);
    case DType::I8: return std::to_string(static_cast<const int8_t*>(base)[i]);
    case DType::I16: return std::to_string(static_cast<const int16_t*>(base)[i]);
    case DType::I32: return std::to_string(static_cast<const int32_t*>(base)[i]);
    case DType::I64: return std::to_string(static_cast<const int64_t*>(base)[i]);
    case DType::F16: return float_str(float(static_cast<const Half*>(base)[i]), true);
    case DType::BF16: return float_str(float(static_cast<const BFloat16*>(base)[i]), true);
    case DType::F32: return float_str(static_cast<const float*>(base)[i], true);
    case DType::F64: return float_str(static_cast<const double*>(base)[i], false);
  }
  return "?";
}

Arg arg_from_default(const IValue& v) {
  if (v.is_scalar()) return v.scalar();
  if (v.is_int_list()) return v.int_list();
  if (v.is_dtype()) return v.dtype();
  if (v.is_string()) return v.string();
  return std::monostate{};
}

// a == arg_from_default(d), without building the Arg.
bool is_default(const Arg& a, const IValue& d) {
  if (d.is_scalar()) return std::holds_alternative<Scalar>(a) && std::get<Scalar>(a) == d.scalar();
  if (d.is_int_list()) return std::holds_alternative<IntList>(a) && std::get<IntList>(a) == d.int_list();
  if (d.is_dtype()) return std::holds_alternative<DType>(a) && std::get<DType>(a) == d.dtype();
  if (d.is_string()) return std::holds_alternative<std::string>(a) && std::get<std::string>(a) == d.string();
  return std::holds_alternative<std::monostate>(a);
}

void append_arg(std::string& out, const Graph& g, const Arg& a) {
  std::visit([&](const auto& v) {
    using V = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<V, std::monostate>) out += "None";
    else if constexpr (std::is_same_v<V, TensorArg>) append_value_ref(out, g, v.id);
    else if constexpr (std::is_same_v<V, TensorListArg>) {
      out += '[';
      for (size_t i = 0; i < v.ids.size(); ++i) {
        if (i) out += ", ";
        if (v.ids[i] == kNoValue) out += "None";
        else append_value_ref(out, g, v.ids[i]);
      }
      out += ']';
    } else if constexpr (std::is_same_v<V, Scalar>) {
      if (v.is_int()) append_int(out, v.to_int());
      else out += v.str();
    } else if constexpr (std::is_same_v<V, IntList>) {
      out += '[';
      append_ints(out, v);
      out += ']';
    } else if constexpr (std::is_same_v<V, DType>) out += dtype_name(v);
    else append_quoted(out, v);
  }, a);
}

// "linear(%x, %w1)": positional arguments up to the first omitted default or kwarg-only one, then key=value.
void append_call(std::string& out, const Graph& g, const Node& n) {
  const Schema& s = n.info().schema;
  out += n.info().name;
  out += '(';
  bool keyword = false, first = true;
  for (size_t i = 0; i < n.args.size(); ++i) {
    const ArgSpec* spec = i < s.args.size() ? &s.args[i] : nullptr;
    if (spec && spec->default_value && is_default(n.args[i], *spec->default_value)) {
      keyword = true;
      continue;
    }
    if (!first) out += ", ";
    first = false;
    if (spec) {
      keyword |= spec->kwarg_only;
      if (keyword) {
        out += spec->name;
        out += '=';
      }
    }
    append_arg(out, g, n.args[i]);
  }
  out += ')';
}

std::string call_str(const Graph& g, const Node& n) {
  std::string out;
  append_call(out, g, n);
  return out;
}

void append_results(std::string& out, const Graph& g, const Node& n) {
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    if (i) out += ", ";
    append_value_ref(out, g, n.outputs[i]);
  }
}

std::string results_str(const Graph& g, const Node& n) {
  std::string out;
  append_results(out, g, n);
  return out;
}

// A constant its source read from a .npy file: the file name and content hash as written there.
struct NpyReference {
  std::string file, sha256;
};

void append_npy_reference(std::string& out, const NpyReference& ref) {
  out += "npy(";
  append_quoted(out, ref.file);
  out += ") sha256=";
  append_quoted(out, ref.sha256);
}

// `ref`: the constant's reference in the source it was parsed from, printed again as it was (kiln fmt).
void append_constant(std::string& out, const Graph& g, const Node& n, const PrintOptions& opts,
                     const NpyReference* ref) {
  const Tensor& c = n.constant;
  ValueId id = n.outputs.empty() ? kNoValue : n.outputs[0];
  append_value_ref(out, g, id);
  out += " = constant ";
  append_type(out, c.meta());
  out += ' ';
  if (ref) {
    append_npy_reference(out, *ref);
  } else if (!opts.npy_dir.empty() && c.numel() > opts.inline_constant_limit) {
    std::string hash = tensor_sha256(c);
    std::string stem;
    for (char ch : g.name) stem += is_ident_char(ch) || ch == '-' ? ch : '_';
    std::string file = fmt::format("{}.{}.npy", stem.empty() ? "graph" : stem, hash.substr(0, 12));
    write_npy((std::filesystem::path(opts.npy_dir) / file).string(), c);
    append_npy_reference(out, {file, hash});
  } else if (c.dim() == 0) {
    out += element_str(c, 0);
  } else {
    Tensor cc = c.is_contiguous() ? c : contiguous(c);
    out += '[';
    for (int64_t i = 0; i < cc.numel(); ++i) {
      if (i) out += ", ";
      out += element_str(cc, i);
    }
    out += ']';
  }
  if (id >= 0 && id < g.num_values()) append_markers(out, g.value(id));
}

void append_op(std::string& out, const Graph& g, const Node& n) {
  append_results(out, g, n);
  out += " = ";
  append_call(out, g, n);
  out += " : ";
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    if (i) out += ", ";
    ValueId id = n.outputs[i];
    if (id < 0 || id >= g.num_values()) {
      out += '?';
      continue;
    }
    append_type(out, g.value(id).meta);
    append_markers(out, g.value(id));
  }
}

// ---------------------------------------------------------------- lexer

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

  Token next() {
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

  void skip_space_and_comments() {
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

  // digits ['.' digits] [('e'|'E') ['+'|'-'] digits]; a sign is a separate '-' token.
  void number(Token& t) {
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

  // The body of a string after its opening quote, unescaped; a view of the source when it has no escapes.
  std::string_view string_body(int line, int col) {
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

  std::string_view src_;
  const std::string& file_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
  int last_token_line_ = 0;
  std::vector<Comment> comments_;
  std::deque<std::string> strings_;  // unescaped strings that tokens view (a deque keeps them in place)
};

// ---------------------------------------------------------------- parser

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// " (did you mean 'x'?)" (or %x for value names) when some candidate is close to `word`.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates, bool value_names) {
  if (word.size() > 64) return "";
  std::string best;
  size_t best_d = std::max<size_t>(1, word.size() / 3) + 1;
  for (const std::string& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_d && d < word.size()) best_d = d, best = c;
  }
  if (best.empty()) return "";
  return fmt::format(" (did you mean {}?)", value_names ? name_ref(best) : "'" + best + "'");
}

// A parsed argument before it is matched to its schema slot.
struct Literal {
  enum Kind { ValueRef, Int, Float, Bool, None, Str, DTypeName, List } kind = None;
  Token at;
  ValueId id = kNoValue;
  int64_t i = 0;
  double d = 0;
  bool b = false;
  std::string s;
  DType dtype = DType::F32;
  std::vector<Literal> items;
};

struct Typed {
  TensorMeta meta;
  bool grad = false, wrapped = false;
  Token at;
};

class Parser {
 public:
  Parser(std::string_view text, const std::string& file) : lex_(text, file), file_(file) {
    // About one value and node per line (a statement is at least ~8 bytes): room for them up front saves
    // re-growing the graph's arrays and name map.
    size_t lines = size_t(std::count(text.begin(), text.end(), '\n')) + 1;
    size_t estimate = std::min(lines, text.size() / 8 + 1);
    g_.reserve(estimate, estimate + 8);
    binder_.reserve(estimate + 8);
  }

  Graph parse() {
    expect_word("graph", "a .kir file starts with 'graph NAME(inputs) {'");
    Token name = take();
    if (name.kind != Tok::Ident && name.kind != Tok::String) unexpected(name, "the graph's name");
    g_.name = std::string(name.text);
    expect('(', "to open the graph's input list");
    if (!peek().is(')')) {
      do parse_input();
      while (accept(','));
    }
    expect(')', "to close the graph's input list");
    expect('{', "to open the graph's body");
    while (!peek().is_word("return")) {
      if (peek().kind != Tok::Value) unexpected(peek(), "a statement ('%name = ...') or 'return'");
      parse_statement();
    }
    take();
    std::vector<ValueId> outs;
    if (peek().kind == Tok::Value) {
      do outs.push_back(lookup(take()));
      while (accept(','));
    }
    g_.set_outputs(outs);
    expect('}', "to close the graph after its return statement");
    if (peek().kind != Tok::End)
      fail_at(peek(), fmt::format("unexpected {} after the graph's closing '}}'; a .kir file holds exactly one graph",
                                  describe(peek())));
    return std::move(g_);
  }

  [[noreturn]] void fail_at(const Token& t, const std::string& msg) const { lex_.fail(t.line, t.col, msg); }

  const Token& last() const { return last_; }

 private:
  // ---- tokens
  const Token& peek(size_t k = 0) {
    while (ahead_count_ <= k) ahead_[(ahead_head_ + ahead_count_++) % kLookahead] = lex_.next();
    return ahead_[(ahead_head_ + k) % kLookahead];
  }
  Token take() {
    peek();
    last_ = ahead_[ahead_head_];
    ahead_head_ = (ahead_head_ + 1) % kLookahead;
    --ahead_count_;
    return last_;
  }
  bool accept(char p) {
    if (!peek().is(p)) return false;
    take();
    return true;
  }
  [[noreturn]] void unexpected(const Token& t, std::string_view expected) const {
    fail_at(t, fmt::format("expected {} but found {}; {}", expected, describe(t),
                           t.kind == Tok::End ? "the file ends too early (is it truncated?)"
                                              : "see docs/kir-format.md for the syntax"));
  }
  // Takes the punctuation `p`, or fails saying why it was expected (formatted only then: `why` and its arguments
  // are a fmt format string, as most of them name something).
  template <class... A>
  Token expect(char p, fmt::format_string<A...> why, A&&... args) {
    if (!peek().is(p)) unexpected(peek(), fmt::format("'{}' {}", p, fmt::format(why, std::forward<A>(args)...)));
    return take();
  }
  void expect_word(std::string_view w, std::string_view why) {
    if (!peek().is_word(w)) unexpected(peek(), fmt::format("'{}' ({})", w, why));
    take();
  }

  // ---- numbers
  int64_t to_int(const Token& t, bool negative) const {
    uint64_t u = 0;
    auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), u);
    const uint64_t limit = negative ? uint64_t(1) << 63 : uint64_t(std::numeric_limits<int64_t>::max());
    if (ec != std::errc() || p != t.text.data() + t.text.size() || u > limit)
      fail_at(t, fmt::format("integer {}{} does not fit in 64 bits; use a smaller value", negative ? "-" : "", t.text));
    return negative ? int64_t(0 - u) : int64_t(u);  // 0 - u wraps modulo 2^64, so -2^63 comes out exactly
  }
  template <class F>
  F to_float(const Token& t, bool negative, std::string_view what) const {
    if (t.is_word("inf")) return negative ? -std::numeric_limits<F>::infinity() : std::numeric_limits<F>::infinity();
    if (t.is_word("nan")) return std::numeric_limits<F>::quiet_NaN();
    F v = 0;
    auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (ec != std::errc() || p != t.text.data() + t.text.size())
      fail_at(t, fmt::format("{}{} is out of range for {}; write inf or -inf if that is meant, or 0.0 for an "
                             "underflow", negative ? "-" : "", t.text, what));
    return negative ? -v : v;
  }
  // [-] (Int | Float | inf | nan); returns the number token and whether it was negated.
  std::pair<Token, bool> signed_number(std::string_view expected) {
    bool negative = accept('-');
    Token t = take();
    bool ok = t.kind == Tok::Int || t.kind == Tok::Float || t.is_word("inf") || t.is_word("nan");
    if (!ok) unexpected(t, expected);
    return {t, negative};
  }
  bool at_number() {
    const Token& t = peek();
    return t.is('-') || t.kind == Tok::Int || t.kind == Tok::Float || t.is_word("inf") || t.is_word("nan");
  }

  // ---- types: DTYPE '[' sizes ']' ['{' strides '}'] ['@' device]
  int64_t bounded_int(std::string_view what) {
    if (peek().is('-')) fail_at(peek(), fmt::format("negative {}; {}s are at least 0", what, what));
    Token t = take();
    if (t.kind != Tok::Int) unexpected(t, fmt::format("a {} (an integer)", what));
    int64_t v = to_int(t, false);
    if (v > kMaxElements) fail_at(t, fmt::format("{} {} is absurdly large (the limit is 2^40); check the file", what, v));
    return v;
  }
  // Reads the list into `out` (reusing its capacity).
  void int_list(char close, std::string_view what, std::vector<int64_t>& out) {
    out.clear();
    if (!peek().is(close)) {
      do {
        if (out.size() >= size_t(kMaxRank)) fail_at(peek(), fmt::format("more than {} dimensions; check the type", kMaxRank));
        out.push_back(bounded_int(what));
      } while (accept(','));
    }
    expect(close, "to close the list of {}s", what);
  }
  TensorMeta parse_type() {
    TensorMeta m;
    parse_type_into(m);
    return m;
  }
  // Reads a type into `m`, reusing the capacity of its vectors (the parser reads a type per result).
  void parse_type_into(TensorMeta& m) {
    Token dt = take();
    if (dt.kind != Tok::Ident) unexpected(dt, "a type such as f32[4, 3]");
    auto dtype = dtype_from_name(dt.text);
    if (!dtype) {
      std::vector<std::string> names;
      for (int i = 0; i < kNumDTypes; ++i) names.emplace_back(dtype_name(DType(i)));
      fail_at(dt, fmt::format("unknown dtype '{}'{}; the dtypes are {}", dt.text, did_you_mean(dt.text, names, false),
                              kDTypeList));
    }
    m.dtype = *dtype;
    m.device = Device{};
    Token open = expect('[', "after the dtype {} (a type is written like {}[4, 3])", dt.text, dt.text);
    int_list(']', "size", m.sizes);
    int64_t numel = 1;
    for (int64_t s : m.sizes) {
      if (!grow_numel(numel, s))
        fail_at(open, fmt::format("the shape {} has more than 2^40 elements; check the sizes", shape_str(m.sizes)));
    }
    if (peek().is('{')) {
      Token brace = take();
      int_list('}', "stride", m.strides);
      if (m.strides.size() != m.sizes.size())
        fail_at(brace, fmt::format("{} strides for {} dimensions; write one stride per dimension, or none for a "
                                   "contiguous tensor", m.strides.size(), m.sizes.size()));
    } else {  // contiguous; no overflow, as the sizes hold at most 2^40 elements
      m.strides.resize(m.sizes.size());
      int64_t stride = 1;
      for (size_t i = m.sizes.size(); i-- > 0;) {
        m.strides[i] = stride;
        stride *= std::max<int64_t>(m.sizes[i], 1);
      }
    }
    if (accept('@')) {
      Token dev = take();
      if (dev.is_word("cpu")) {
        m.device = Device{};
      } else if (dev.is_word("cuda")) {
        m.device.type = DeviceType::CUDA;
        if (accept(':')) {
          Token idx = take();
          if (idx.kind != Tok::Int) unexpected(idx, "a device index such as 0");
          int64_t i = to_int(idx, false);
          if (i > kMaxDeviceIndex) fail_at(idx, fmt::format("device index {} is out of range; use 0..{}", i, kMaxDeviceIndex));
          m.device.index = int(i);
        }
      } else {
        unexpected(dev, "a device ('cpu' or 'cuda:N')");
      }
    }
  }
  Typed parse_typed() {
    Typed t;
    parse_typed_into(t);
    return t;
  }
  void parse_typed_into(Typed& t) {
    t.at = peek();
    t.grad = t.wrapped = false;
    parse_type_into(t.meta);
    while (true) {
      if (peek().is_word("grad")) take(), t.grad = true;
      else if (peek().is_word("wrapped")) take(), t.wrapped = true;
      else break;
    }
  }

  // ---- names
  // Value names are looked up in the graph's own name map (one hash lookup per use).
  void check_new_name(const Token& t) {
    if (std::optional<ValueId> id = g_.find_value(t.text)) {
      const SourceLoc& loc = g_.value(*id).loc;
      fail_at(t, fmt::format("{} is already defined at line {}:{}; every value gets its own name (SSA)",
                             name_ref(t.text), loc.line, loc.col));
    }
  }
  void define(const Token& t, ValueId id, bool grad, bool wrapped) {
    ValueInfo& v = g_.value(id);
    v.loc = {t.line, t.col};
    v.requires_grad |= grad;
    v.wrapped_number |= wrapped;
  }
  ValueId lookup(const Token& t) {
    if (t.kind != Tok::Value) unexpected(t, "a value such as %x");
    if (std::optional<ValueId> id = g_.find_value(t.text)) return *id;
    std::vector<std::string> known;
    for (ValueId id = 0; id < g_.num_values(); ++id) known.push_back(g_.value(id).name);
    std::string hint = did_you_mean(t.text, known, true);
    fail_at(t, fmt::format("{} is used before it is defined{}; define it on an earlier line (a graph lists each value "
                           "before its uses, which also rules out cycles)", name_ref(t.text), hint));
  }

  void parse_input() {
    Token name = take();
    if (name.kind != Tok::Value) unexpected(name, "a graph input such as %x: f32[4, 3]");
    check_new_name(name);
    expect(':', "and a type after the input {}", name_ref(name.text));
    Typed t = parse_typed();
    ValueId id = g_.add_input(std::string(name.text), t.meta, t.grad);
    define(name, id, t.grad, t.wrapped);
  }

  void parse_statement() {
    std::vector<Token>& names = names_buf_;
    names.clear();
    do {
      Token n = take();
      if (n.kind != Tok::Value) unexpected(n, "a result name such as %y");
      check_new_name(n);
      for (const Token& prev : names)
        if (prev.text == n.text) fail_at(n, fmt::format("{} is named twice in one statement", name_ref(n.text)));
      names.push_back(n);
    } while (accept(','));
    expect('=', "after the result names");
    Token what = take();
    if (what.is_word("constant")) {
      if (names.size() != 1) fail_at(names[1], "a constant defines exactly one value; split it into one line each");
      parse_constant(names[0]);
    } else if (what.kind == Tok::Ident) {
      parse_op(names, what);
    } else {
      unexpected(what, "an op name or 'constant' after '='");
    }
  }

  // ---- constants: 'constant' TYPE (number | '[' numbers ']' | npy("file") sha256="hex") markers
  void append_element(std::vector<unsigned char>& bytes, DType dt) {
    auto put = [&](auto v) {
      const auto* p = reinterpret_cast<const unsigned char*>(&v);
      bytes.insert(bytes.end(), p, p + sizeof(v));
    };
    if (dt == DType::Bool) {
      Token t = take();
      if (!t.is_word("True") && !t.is_word("False")) unexpected(t, "True or False (the constant is bool)");
      put(bool(t.is_word("True")));
      return;
    }
    auto [t, negative] = signed_number("a number");
    if (!is_floating(dt)) {
      if (t.kind != Tok::Int) fail_at(t, fmt::format("{} constants hold integers, not {}", dtype_name(dt), describe(t)));
      int64_t v = to_int(t, negative);
      auto fits = [&](int64_t lo, int64_t hi) {
        if (v < lo || v > hi) fail_at(t, fmt::format("{} does not fit in {} ({}..{})", v, dtype_name(dt), lo, hi));
      };
      switch (dt) {
        case DType::U8: fits(0, 255), put(uint8_t(v)); break;
        case DType::I8: fits(-128, 127), put(int8_t(v)); break;
        case DType::I16: fits(INT16_MIN, INT16_MAX), put(int16_t(v)); break;
        case DType::I32: fits(INT32_MIN, INT32_MAX), put(int32_t(v)); break;
        default: put(v); break;
      }
      return;
    }
    if (dt == DType::F64) return put(to_float<double>(t, negative, "f64"));
    float f = to_float<float>(t, negative, dtype_name(dt));
    if (dt == DType::F32) return put(f);
    auto check_finite = [&](float back) {
      if (std::isinf(back) && !std::isinf(f))
        fail_at(t, fmt::format("{} is out of range for {}; write inf if that is meant", t.text, dtype_name(dt)));
    };
    if (dt == DType::F16) {
      Half h(f);
      check_finite(float(h));
      put(h);
    } else {
      BFloat16 h(f);
      check_finite(float(h));
      put(h);
    }
  }

  Tensor load_npy_constant(const TensorMeta& m) {
    expect('(', "after npy (write npy(\"file.npy\"))");
    Token file = take();
    if (file.kind != Tok::String) unexpected(file, "the .npy file name as a string");
    expect(')', "after the .npy file name");
    expect_word("sha256", "npy constants record their content hash: sha256=\"...\"");
    expect('=', "after sha256");
    Token hash = take();
    if (hash.kind != Tok::String) unexpected(hash, "the SHA-256 of the constant's elements as a hex string");
    std::filesystem::path path;
    try {
      path = confined_path(std::filesystem::path(file_).parent_path(), file.text, "the constant file");
    } catch (const Error& e) {
      fail_at(file, e.what());
    }
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
      fail_at(file, fmt::format("constant file {} does not exist or is not a regular file; it must lie beside the "
                                ".kir (paths are relative to the .kir's directory)", path.string()));
    Tensor t;
    try {
      t = read_npy(path.string(), m.dtype);
    } catch (const Error& e) {
      fail_at(file, fmt::format("{}; re-export the constant", e.what()));
    }
    if (t.sizes() != m.sizes)
      fail_at(file, fmt::format("{} holds a tensor of shape {} but the constant is declared {}; fix the type or the file",
                                path.string(), shape_str(t.sizes()), type_str(m)));
    std::string actual = tensor_sha256(t);
    if (actual != hash.text)
      fail_at(hash, fmt::format("the content hash of {} is {}, not the recorded {}; the file was changed after the "
                                ".kir was written (restore it, or record the new hash if the change is intended)",
                                path.string(), actual, hash.text));
    return t;
  }

  void parse_constant(const Token& name) {
    Token type_at = peek();
    TensorMeta m = parse_type();
    if (m.strides != contiguous_strides(m.sizes))
      fail_at(type_at, "constants are stored contiguous; drop the {strides} from the constant's type");
    Tensor t;
    if (peek().is_word("npy")) {
      take();
      t = load_npy_constant(m);
    } else {
      std::vector<unsigned char> bytes;
      int64_t numel = shape_numel(m.sizes);
      if (peek().is('[')) {
        Token open = take();
        int64_t count = 0;
        if (!peek().is(']')) {
          do {
            if (count == numel)
              fail_at(peek(), fmt::format("more elements than the constant's type {} holds ({}); fix the type or the "
                                          "data", type_str(m), numel));
            append_element(bytes, m.dtype);
            ++count;
          } while (accept(','));
        }
        expect(']', "to close the constant's elements");
        if (count != numel)
          fail_at(open, fmt::format("{} elements given but the type {} holds {}; fix the type or the data", count,
                                    type_str(m), numel));
      } else {
        if (!m.sizes.empty())
          unexpected(peek(), fmt::format("the constant's {} elements as a list [a, b, ...]", numel));
        append_element(bytes, m.dtype);
      }
      t = Tensor::empty(m.sizes, m.dtype);
      if (!bytes.empty()) std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
    }
    bool grad = false, wrapped = false;
    while (true) {
      if (peek().is_word("grad")) take(), grad = true;
      else if (peek().is_word("wrapped")) {
        if (!m.sizes.empty()) fail_at(peek(), "only 0-dim constants can be wrapped numbers");
        take(), wrapped = true;
      } else break;
    }
    t.impl()->wrapped_number = wrapped;
    ValueId id = g_.add_constant(std::string(name.text), t);
    g_.nodes().back().loc = {name.line, name.col};
    define(name, id, grad, wrapped);
  }

  // ---- op calls: OP '(' [arg {',' arg}] ')' [':' typed {',' typed}]
  Literal parse_literal(bool in_list) {
    Literal lit;
    lit.at = peek();
    const Token& t = peek();
    if (t.is('[')) {
      if (in_list) fail_at(t, "lists do not nest; an argument is a flat list such as [1, 2] or [%a, %b]");
      take();
      lit.kind = Literal::List;
      if (!peek().is(']')) {
        do lit.items.push_back(parse_literal(true));
        while (accept(','));
      }
      expect(']', "to close the list");
    } else if (at_number()) {
      auto [num, negative] = signed_number("a number");
      if (num.kind == Tok::Int) lit.kind = Literal::Int, lit.i = to_int(num, negative);
      else lit.kind = Literal::Float, lit.d = to_float<double>(num, negative, "a 64-bit float");
    } else if (t.kind == Tok::Value) {
      lit.kind = Literal::ValueRef;
      lit.id = lookup(take());
    } else if (t.kind == Tok::String) {
      lit.kind = Literal::Str;
      lit.s = std::string(take().text);
    } else if (t.is_word("True") || t.is_word("False")) {
      lit.kind = Literal::Bool;
      lit.b = take().text == "True";
    } else if (t.is_word("None")) {
      take();
      lit.kind = Literal::None;
    } else if (t.kind == Tok::Ident) {
      auto dt = dtype_from_name(t.text);
      if (!dt)
        fail_at(t, fmt::format("unknown word '{}' in an argument; values are written %{}, strings \"{}\", booleans "
                               "True/False, dtypes {}", t.text, t.text, t.text, kDTypeList));
      take();
      lit.kind = Literal::DTypeName;
      lit.dtype = *dt;
    } else {
      unexpected(t, "an argument (a %value, number, True/False, None, \"string\", dtype or [list])");
    }
    return lit;
  }

  Arg to_arg(const Literal& lit, const OpInfo& op, const ArgSpec& spec) {
    switch (lit.kind) {
      case Literal::ValueRef: return TensorArg{lit.id};
      case Literal::Int: return Scalar(lit.i);
      case Literal::Float: return Scalar(lit.d);
      case Literal::Bool: return Scalar(lit.b);
      case Literal::None: return std::monostate{};
      case Literal::Str: return lit.s;
      case Literal::DTypeName: return lit.dtype;
      case Literal::List: break;
    }
    bool tensor_slot = spec.type == ArgType::TensorList || spec.type == ArgType::OptTensorList;
    bool has_values = std::any_of(lit.items.begin(), lit.items.end(), [](const Literal& l) {
      return l.kind == Literal::ValueRef || l.kind == Literal::None;
    });
    if (tensor_slot || has_values) {
      TensorListArg list;
      for (const Literal& item : lit.items) {
        if (item.kind != Literal::ValueRef && item.kind != Literal::None)
          fail_at(item.at, fmt::format("argument '{}' of {} is a list of tensors; its entries are %values (or None "
                                       "in a Tensor?[] list)", spec.name, op.name));
        list.ids.push_back(item.kind == Literal::None ? kNoValue : item.id);
      }
      return list;
    }
    IntList ints;
    for (const Literal& item : lit.items) {
      if (item.kind != Literal::Int)
        fail_at(item.at, fmt::format("argument '{}' of {}: lists of numbers hold integers only", spec.name, op.name));
      if (item.i > kMaxElements || item.i < -kMaxElements)
        fail_at(item.at, fmt::format("list entry {} is absurdly large (the limit is 2^40); check argument '{}'",
                                     item.i, spec.name));
      ints.push_back(item.i);
    }
    return ints;
  }

  std::vector<Arg> parse_call(const OpInfo& op, const Token& op_tok) {
    const Schema& s = op.schema;
    std::vector<Arg> args(s.args.size());
    std::vector<bool>& given = given_buf_;
    given.assign(s.args.size(), false);
    expect('(', "after the op name {}", op.name);
    size_t positional = 0;
    bool seen_keyword = false;
    if (!peek().is(')')) {
      do {
        if (peek().kind == Tok::Ident && peek(1).is('=')) {
          Token key = take();
          take();
          int i = s.arg_index(key.text);
          if (i < 0) {
            std::vector<std::string> names;
            for (const ArgSpec& a : s.args) names.push_back(a.name);
            fail_at(key, fmt::format("{}() has no argument '{}'{}; its schema is {}", op.name, key.text,
                                     did_you_mean(key.text, names, false), s.str()));
          }
          if (given[size_t(i)]) fail_at(key, fmt::format("argument '{}' of {}() is given twice", key.text, op.name));
          args[size_t(i)] = to_arg(parse_literal(false), op, s.args[size_t(i)]);
          given[size_t(i)] = true;
          seen_keyword = true;
        } else {
          const Token& at = peek();
          if (seen_keyword)
            fail_at(at, fmt::format("positional argument after keyword arguments in {}(); name it (key=value) or "
                                    "move it before them", op.name));
          if (positional >= s.args.size() || s.args[positional].kwarg_only) {
            std::string rest;
            if (positional < s.args.size()) rest = fmt::format("; pass '{}' as {}=...", s.args[positional].name,
                                                               s.args[positional].name);
            fail_at(at, fmt::format("{}() takes {} positional arguments but more were given{} (schema: {})", op.name,
                                    positional, rest, s.str()));
          }
          args[positional] = to_arg(parse_literal(false), op, s.args[positional]);
          given[positional] = true;
          ++positional;
        }
      } while (accept(','));
    }
    expect(')', "to close the argument list of {}", op.name);
    for (size_t i = 0; i < s.args.size(); ++i) {
      if (given[i]) {
        continue;
      } else if (s.args[i].default_value) {
        args[i] = arg_from_default(*s.args[i].default_value);
      } else {
        fail_at(op_tok, fmt::format("{}() is missing required argument '{}'; its schema is {}", op.name,
                                    s.args[i].name, s.str()));
      }
    }
    return args;
  }

  void parse_op(const std::vector<Token>& names, const Token& op_tok) {
    const OpInfo* op = find_op(op_tok.text);
    if (!op) {
      std::vector<std::string> all;
      for (const OpInfo& o : all_ops()) all.emplace_back(o.name);
      if (op_tok.text.find("::") != std::string_view::npos)
        fail_at(op_tok, fmt::format("unknown op '{}': a custom op exists only in a program that registers it "
                                    "(kiln::register_op, docs/capture.md); run this graph from that program",
                                    op_tok.text));
      fail_at(op_tok, fmt::format("unknown op '{}'{}; `kiln ops` lists the ops", op_tok.text,
                                  did_you_mean(op_tok.text, all, false)));
    }
    Node n;
    n.kind = NodeKind::Op;
    n.op = op->id;
    n.args = parse_call(*op, op_tok);
    n.loc = {names[0].line, names[0].col};
    // The verifier's node check (argument binding and shape inference), run as the node is read, so errors come
    // in file order at the token they concern and the parsed graph needs no second pass.
    std::vector<TensorMeta> metas;
    try {
      metas = binder_.infer(n);
    } catch (const Error& e) {
      fail_at(op_tok, e.what());
    }
    if (metas.size() != names.size())
      fail_at(names[0], fmt::format("{}(...) produces {} result{} here but {} name{} given; write {} names", op->name,
                                    metas.size(), metas.size() == 1 ? "" : "s", names.size(),
                                    names.size() == 1 ? " is" : "s are", metas.size()));
    for (size_t k = 0; k < metas.size(); ++k)
      if (std::string problem = meta_problem(metas[k]); !problem.empty())
        fail_at(op_tok, fmt::format("{}(...) would produce {} with {}; check the arguments", op->name,
                                    name_ref(names[k].text), problem));
    std::vector<Typed>& written = written_buf_;
    size_t num_written = 0;
    if (peek().is(':')) {
      Token colon = take();
      do {
        if (written.size() <= num_written) written.emplace_back();
        parse_typed_into(written[num_written++]);
      } while (accept(','));
      if (num_written != metas.size())
        fail_at(colon, fmt::format("{} types written for {} results; write one type per result", num_written,
                                   metas.size()));
      for (size_t k = 0; k < metas.size(); ++k)
        if (!(written[k].meta == metas[k]))
          fail_at(written[k].at, fmt::format("{} is written as {} but {}(...) gives {}; fix the type (or the arguments)",
                                             name_ref(names[k].text), type_str(written[k].meta), op->name,
                                             type_str(metas[k])));
    }
    std::vector<std::string> result_names;
    result_names.reserve(names.size());
    for (const Token& t : names) result_names.emplace_back(t.text);
    std::vector<ValueId> ids = g_.add_op(op->id, std::move(n.args), std::move(result_names), std::move(metas));
    g_.nodes().back().loc = n.loc;
    for (size_t k = 0; k < ids.size(); ++k)
      define(names[k], ids[k], num_written > 0 && written[k].grad, num_written > 0 && written[k].wrapped);
  }

  Lexer lex_;
  const std::string& file_;
  static constexpr size_t kLookahead = 2;  // peek(1) is the furthest the grammar looks
  Token ahead_[kLookahead];                 // a ring of tokens read but not yet taken
  size_t ahead_head_ = 0, ahead_count_ = 0;
  Token last_;
  Graph g_;
  std::vector<Token> names_buf_;  // the result names of the statement being parsed (reused)
  std::vector<bool> given_buf_;   // which arguments of the call being parsed were given (reused)
  std::vector<Typed> written_buf_;  // the result types written for the statement being parsed (reused)
  MetaBinder binder_{g_};          // binds each op node to meta tensors for its shape inference
};

// ---------------------------------------------------------------- verifier helpers

std::string where(const std::string& file, const SourceLoc& loc) {
  return loc.known() ? fmt::format("{}:{}:{}", file, loc.line, loc.col) : file;
}

std::string node_summary(const Graph& g, const Node& n, int index) {
  std::string text = n.kind == NodeKind::Constant
                         ? fmt::format("{} = constant", results_str(g, n))
                         : fmt::format("{} = {}", results_str(g, n), call_str(g, n));
  if (text.size() > 120) text = text.substr(0, 117) + "...";
  return fmt::format("node {} ({})", index, text);
}

// print_graph, with `refs` (by node index) the constants to print as the .npy references they were read from.
std::string print_graph_with(const Graph& g, const PrintOptions& opts,
                             const std::unordered_map<size_t, NpyReference>& refs) {
  std::vector<std::string> params;
  size_t params_size = 0;
  for (ValueId id : g.inputs()) {
    const ValueInfo& v = g.value(id);
    std::string p;
    append_name_ref(p, v.name);
    p += ": ";
    append_type(p, v.meta);
    append_markers(p, v);
    params_size += p.size() + 2;
    params.push_back(std::move(p));
  }
  std::string out = fmt::format("graph {}(", graph_name_str(g.name));
  out.reserve(64 * (g.nodes().size() + 1) + params_size);
  // Inputs on one line, or one per line when that would be longer than 100 characters.
  bool one_line = out.size() + params_size - std::min<size_t>(params_size, 2) <= 100 || params.empty();
  for (size_t i = 0; i < params.size(); ++i) {
    out += i == 0 ? (one_line ? "" : "\n    ") : (one_line ? ", " : ",\n    ");
    out += params[i];
  }
  out += ") {\n";
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    out += "  ";
    if (n.kind == NodeKind::Constant) {
      auto ref = refs.find(i);
      append_constant(out, g, n, opts, ref == refs.end() ? nullptr : &ref->second);
    } else {
      append_op(out, g, n);
    }
    if (n.loc.file && n.loc.known()) out += fmt::format("  # {}:{}", n.loc.file, n.loc.line);  // captured from C++
    out += '\n';
  }
  out += "  return";
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    out += i == 0 ? " " : ", ";
    append_value_ref(out, g, g.outputs()[i]);
  }
  out += "\n}\n";
  return out;
}

}  // namespace

// ---------------------------------------------------------------- public API

std::string print_graph(const Graph& g, const PrintOptions& opts) { return print_graph_with(g, opts, {}); }

Graph parse_graph(std::string_view text, const std::string& filename) {
  Parser p(text, filename);
  try {
    return p.parse();
  } catch (const Error& e) {
    // Errors raised below the parser (tensor allocation, graph construction) get the location they arose at.
    if (std::string_view(e.what()).starts_with(filename + ":")) throw;
    p.fail_at(p.last(), e.what());
  }
}

namespace {

// Where a source's comments go in the printed graph, by slot: 0 = before the graph, 1 = the header line,
// 2 + i = node i, 2 + n = the return line, 3 + n = the closing '}'. A comment on a line of its own goes before
// the first statement below it; one after code goes at the end of the last statement starting at or above it.
struct CommentPlaces {
  std::vector<std::vector<std::string>> before;  // own-line comments, printed above the slot's line
  std::vector<std::string> trailing;             // comments after code, appended to the slot's line
};

CommentPlaces place_comments(const Graph& g, std::string_view source, const std::string& filename) {
  Lexer lexer(source, filename);
  int graph_line = 0, return_line = INT_MAX, close_line = INT_MAX;
  for (Token t = lexer.next(); t.kind != Tok::End; t = lexer.next()) {
    if (t.kind == Tok::Ident && t.text == "graph" && graph_line == 0) graph_line = t.line;
    if (t.kind == Tok::Ident && t.text == "return") return_line = t.line;
    if (t.kind == Tok::Punct && t.text == "}") close_line = t.line;
  }
  const std::vector<Node>& nodes = g.nodes();
  const size_t n = nodes.size();
  CommentPlaces places{std::vector<std::vector<std::string>>(n + 4), std::vector<std::string>(n + 4)};
  for (const auto& c : lexer.comments()) {
    if (c.trailing) {
      size_t slot = 1;
      for (size_t i = 0; i < n; ++i)
        if (nodes[i].loc.line <= c.line) slot = 2 + i;
      if (c.line >= return_line) slot = 2 + n;
      if (c.line >= close_line && close_line != return_line) slot = 3 + n;
      places.trailing[slot] += (places.trailing[slot].empty() ? "  " : " ") + c.text;
      continue;
    }
    size_t slot = c.line < graph_line ? 0 : 2 + n;
    if (slot != 0) {
      for (size_t i = n; i-- > 0;)
        if (nodes[i].loc.line > c.line) slot = 2 + i;
      if (slot == 2 + n && c.line > close_line) slot = 3 + n;
    }
    places.before[slot].push_back(c.text);
  }
  return places;
}

// The constants of `g` (parsed from `source`) that the source reads from .npy files, by node index: each
// `npy("file") sha256="hash"` belongs to the statement that starts last before it (a node's location is its
// first result's name).
std::unordered_map<size_t, NpyReference> npy_references(const Graph& g, std::string_view source,
                                                        const std::string& filename) {
  std::unordered_map<size_t, NpyReference> refs;
  const std::vector<Node>& nodes = g.nodes();
  Lexer lexer(source, filename);
  std::vector<Token> window;  // the last 7 tokens: npy ( "file" ) sha256 = "hash"
  size_t node = 0;            // the first node starting after the window's first token
  for (Token t = lexer.next(); t.kind != Tok::End; t = lexer.next()) {
    window.push_back(t);
    if (window.size() > 7) window.erase(window.begin());
    if (window.size() < 7 || !window[0].is_word("npy") || !window[1].is('(') || window[2].kind != Tok::String ||
        !window[3].is(')') || !window[4].is_word("sha256") || !window[5].is('=') || window[6].kind != Tok::String)
      continue;
    auto starts_before = [&](const Node& n) {
      return n.loc.line < window[0].line || (n.loc.line == window[0].line && n.loc.col < window[0].col);
    };
    while (node < nodes.size() && starts_before(nodes[node])) ++node;
    KILN_ASSERT(node > 0 && nodes[node - 1].kind == NodeKind::Constant, "{}:{}:{}: an npy reference outside a "
                "constant in a graph that parsed", filename, window[0].line, window[0].col);
    refs[node - 1] = {std::string(window[2].text), std::string(window[6].text)};
  }
  return refs;
}

}  // namespace

std::string print_graph_keeping_comments(const Graph& g, std::string_view source, const std::string& filename) {
  const CommentPlaces places = place_comments(g, source, filename);
  // The printed form, by slot: the header up to ") {", one line per node, the return line, "}".
  // Constants read from .npy files stay references to them (inlining a large one would make a file larger
  // than a graph file may be, docs/cli.md).
  const std::string printed = print_graph_with(g, {}, npy_references(g, source, filename));
  const size_t header_end = printed.find(") {\n") + 3;
  std::vector<std::string> lines{printed.substr(0, header_end)};
  for (size_t pos = header_end + 1; pos < printed.size();) {
    size_t nl = printed.find('\n', pos);
    lines.push_back(printed.substr(pos, nl - pos));
    pos = nl + 1;
  }
  std::string out;
  auto own_lines = [&](size_t slot, std::string_view indent) {
    for (const std::string& c : places.before[slot]) out += fmt::format("{}{}\n", indent, c);
  };
  own_lines(0, "");
  for (size_t slot = 1; slot <= lines.size(); ++slot) {
    if (slot >= 2 && slot < lines.size()) own_lines(slot, "  ");
    out += lines[slot - 1] + places.trailing[slot] + "\n";
  }
  own_lines(lines.size(), "");
  return out;
}

Graph load_graph(const std::string& path) { return parse_graph(read_input_file(path, "graph file"), path); }

void save_graph(const Graph& g, const std::string& path, const PrintOptions& opts) {
  write_file_atomic(path, print_graph(g, opts));
}

void verify_graph(const Graph& g, const std::string& filename) {
  // Messages are built only when a check fails: this runs once per node of every graph a tool loads.
  const int nv = g.num_values();
  std::vector<char> defined(size_t(nv), 0);
  // Names are unique when the graph's name map finds every value under its own name (a map holds one id per
  // name); only if one is not found (a value renamed in place) is a set of all names built.
  bool names_indexed = true;
  for (ValueId id = 0; id < nv && names_indexed; ++id) names_indexed = g.find_value(g.value(id).name) == id;
  std::unordered_set<std::string_view> names;  // views of the graph's value names, when needed
  if (!names_indexed) names.reserve(size_t(nv));
  auto define = [&](ValueId id, const auto& context, const SourceLoc& loc) {
    KILN_CHECK(id >= 0 && id < nv, "{}: {} defines value #{}, which does not exist; the graph is corrupt",
               where(filename, loc), context(), id);
    KILN_CHECK(!defined[size_t(id)], "{}: {} defines {} a second time; every value is defined once (SSA)",
               where(filename, loc), context(), value_ref(g, id));
    const ValueInfo& v = g.value(id);
    KILN_CHECK(names_indexed || names.insert(v.name).second, "{}: {} reuses the name {}; value names must be unique",
               where(filename, loc), context(), name_ref(v.name));
    defined[size_t(id)] = 1;
  };
  for (ValueId id : g.inputs()) {
    SourceLoc loc = id >= 0 && id < nv ? g.value(id).loc : SourceLoc{};
    define(id, [&] { return fmt::format("graph input {}", value_ref(g, id)); }, loc);
    KILN_CHECK(g.value(id).producer == -1, "{}: graph input {} is also recorded as produced by node {}",
               where(filename, loc), value_ref(g, id), g.value(id).producer);
  }
  MetaBinder binder(g);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    auto what = [&] { return node_summary(g, n, int(i)); };
    auto at = [&] { return where(filename, n.loc); };
    if (n.kind == NodeKind::Constant) {
      KILN_CHECK(n.outputs.size() == 1 && n.constant.defined(), "{}: {}: a constant node holds one defined tensor",
                 at(), what());
    } else {
      KILN_CHECK(n.args.size() == n.info().schema.args.size(), "{}: {}: {} arguments, but the schema {} has {}", at(),
                 what(), n.args.size(), n.info().schema.str(), n.info().schema.args.size());
      auto check_read = [&](ValueId id) {
        KILN_CHECK(id >= 0 && id < nv && defined[size_t(id)],
                   "{}: {}: reads {} before it is defined; nodes must come after the values they use", at(), what(),
                   value_ref(g, id));
      };
      for (const Arg& a : n.args) {
        if (const auto* t = std::get_if<TensorArg>(&a)) check_read(t->id);
        else if (const auto* l = std::get_if<TensorListArg>(&a))
          for (ValueId id : l->ids)
            if (id != kNoValue) check_read(id);
      }
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      ValueId id = n.outputs[k];
      define(id, what, n.loc);
      KILN_CHECK(g.value(id).producer == int(i) && g.value(id).output_index == int(k),
                 "{}: {}: result {} records producer {} output {}, not node {} output {}; the graph is corrupt", at(),
                 what(), value_ref(g, id), g.value(id).producer, g.value(id).output_index, i, k);
    }
    if (n.kind == NodeKind::Constant) {
      const TensorMeta& recorded = g.value(n.outputs[0]).meta;
      const Tensor& c = n.constant;
      bool same = recorded.dtype == c.dtype() && recorded.sizes == c.sizes() && recorded.strides == c.strides() &&
                  recorded.device == c.device();
      KILN_CHECK(same, "{}: {}: the constant is {} but the graph says {}", at(), what(), type_str(c.meta()),
                 type_str(recorded));
      continue;
    }
    std::vector<TensorMeta> inferred;
    try {
      inferred = binder.infer(n);
    } catch (const Error& e) {
      fail("{}: {}: {}", at(), what(), e.what());
    }
    KILN_CHECK(inferred.size() == n.outputs.size(), "{}: {}: the op produces {} results but the graph records {}",
               at(), what(), inferred.size(), n.outputs.size());
    for (size_t k = 0; k < inferred.size(); ++k) {
      const TensorMeta& recorded = g.value(n.outputs[k]).meta;
      KILN_CHECK(recorded == inferred[k],
                 "{}: {}: expected {} but the graph says {} for {}; the recorded meta is stale (re-run shape "
                 "inference) or the arguments are wrong",
                 at(), what(), type_str(inferred[k]), type_str(recorded), value_ref(g, n.outputs[k]));
    }
  }
  for (ValueId id : g.outputs())
    KILN_CHECK(id >= 0 && id < nv && defined[size_t(id)],
               "{}: graph output {} is not defined by an input or a node; return only defined values", filename,
               value_ref(g, id));
}

}  // namespace kiln::graph
