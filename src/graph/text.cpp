// The .kir text format (grammar: docs/kir-format.md): the printer, a hand-written lexer and recursive-descent
// parser that turns every malformed input into a kiln::Error "file:line:col: what is wrong; what to do", and
// the verifier that re-infers every node of a graph. parse_graph(print_graph(g)) reproduces g exactly.
#include "graph/text.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <unistd.h>
#include <unordered_map>

#include "core/npy.h"
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

// ---------------------------------------------------------------- SHA-256 (content hash of .npy constants)

std::string sha256_hex(const unsigned char* data, size_t n) {
  static constexpr uint32_t k[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
      0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
      0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
      0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
      0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
      0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
      0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
      0xc67178f2};
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  auto rotr = [](uint32_t x, int r) { return (x >> r) | (x << (32 - r)); };
  auto block = [&](const unsigned char* p) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = uint32_t(p[4 * i]) << 24 | uint32_t(p[4 * i + 1]) << 16 | uint32_t(p[4 * i + 2]) << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
  };
  size_t full = n / 64 * 64;
  for (size_t i = 0; i < full; i += 64) block(data + i);
  std::array<unsigned char, 128> tail{};
  size_t rest = n - full;
  if (rest) std::memcpy(tail.data(), data + full, rest);
  tail[rest] = 0x80;
  size_t tail_len = rest + 1 + 8 <= 64 ? 64 : 128;
  uint64_t bits = uint64_t(n) * 8;
  for (int i = 0; i < 8; ++i) tail[tail_len - 1 - i] = (unsigned char)(bits >> (8 * i));
  for (size_t i = 0; i < tail_len; i += 64) block(tail.data() + i);
  std::string hex;
  for (uint32_t v : h) hex += fmt::format("{:08x}", v);
  return hex;
}

// The hash recorded for a constant: SHA-256 of its elements in row-major order (numpy: arr.tobytes()).
std::string tensor_sha256(const Tensor& t) {
  Tensor c = t.is_contiguous() ? t : contiguous(t);
  return sha256_hex(static_cast<const unsigned char*>(c.data_ptr()), size_t(c.numel() * dtype_size(c.dtype())));
}

// ---------------------------------------------------------------- printing

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }
bool is_name_char(char c) { return is_ident_char(c) || c == '.'; }

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
        else out += char(c);
    }
  }
  return out + "\"";
}

std::string name_ref(std::string_view name) {
  bool bare = !name.empty() && std::all_of(name.begin(), name.end(), is_name_char);
  return "%" + (bare ? std::string(name) : quote(name));
}

std::string graph_name_str(std::string_view name) {
  bool bare = !name.empty() && is_ident_start(name[0]) && std::all_of(name.begin(), name.end(), is_ident_char);
  return bare ? std::string(name) : quote(name);
}

std::string value_ref(const Graph& g, ValueId id) {
  if (id < 0 || id >= g.num_values()) return fmt::format("%<undefined value #{}>", id);
  return name_ref(g.value(id).name);
}

std::string type_str(const TensorMeta& m) {
  std::string s = fmt::format("{}[{}]", dtype_name(m.dtype), fmt::join(m.sizes, ", "));
  if (m.strides != contiguous_strides(m.sizes)) s += fmt::format("{{{}}}", fmt::join(m.strides, ", "));
  if (!(m.device == Device{})) s += "@" + m.device.str();
  return s;
}

std::string markers(const ValueInfo& v) {
  return std::string(v.requires_grad ? " grad" : "") + (v.wrapped_number ? " wrapped" : "");
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

std::string arg_str(const Graph& g, const Arg& a) {
  return std::visit([&](const auto& v) -> std::string {
    using V = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<V, std::monostate>) return "None";
    else if constexpr (std::is_same_v<V, TensorArg>) return value_ref(g, v.id);
    else if constexpr (std::is_same_v<V, TensorListArg>) {
      std::vector<std::string> parts;
      for (ValueId id : v.ids) parts.push_back(id == kNoValue ? "None" : value_ref(g, id));
      return fmt::format("[{}]", fmt::join(parts, ", "));
    } else if constexpr (std::is_same_v<V, Scalar>) return v.str();
    else if constexpr (std::is_same_v<V, IntList>) return fmt::format("[{}]", fmt::join(v, ", "));
    else if constexpr (std::is_same_v<V, DType>) return std::string(dtype_name(v));
    else return quote(v);
  }, a);
}

// "linear(%x, %w1)": positional arguments up to the first omitted default or kwarg-only one, then key=value.
std::string call_str(const Graph& g, const Node& n) {
  const Schema& s = n.info().schema;
  std::vector<std::string> parts;
  bool keyword = false;
  for (size_t i = 0; i < n.args.size(); ++i) {
    if (i >= s.args.size()) {
      parts.push_back(arg_str(g, n.args[i]));
      continue;
    }
    const ArgSpec& spec = s.args[i];
    if (spec.default_value && n.args[i] == arg_from_default(*spec.default_value)) {
      keyword = true;
      continue;
    }
    keyword |= spec.kwarg_only;
    parts.push_back((keyword ? spec.name + "=" : "") + arg_str(g, n.args[i]));
  }
  return fmt::format("{}({})", n.info().name, fmt::join(parts, ", "));
}

std::string results_str(const Graph& g, const Node& n) {
  std::vector<std::string> names;
  for (ValueId id : n.outputs) names.push_back(value_ref(g, id));
  return fmt::format("{}", fmt::join(names, ", "));
}

std::string constant_str(const Graph& g, const Node& n, const PrintOptions& opts) {
  const Tensor& c = n.constant;
  std::string data;
  if (!opts.npy_dir.empty() && c.numel() > opts.inline_constant_limit) {
    std::string hash = tensor_sha256(c);
    std::string stem;
    for (char ch : g.name) stem += is_ident_char(ch) || ch == '-' ? ch : '_';
    std::string file = fmt::format("{}.{}.npy", stem.empty() ? "graph" : stem, hash.substr(0, 12));
    write_npy((std::filesystem::path(opts.npy_dir) / file).string(), c);
    data = fmt::format("npy({}) sha256={}", quote(file), quote(hash));
  } else if (c.dim() == 0) {
    data = element_str(c, 0);
  } else {
    Tensor cc = c.is_contiguous() ? c : contiguous(c);
    std::vector<std::string> elems;
    for (int64_t i = 0; i < cc.numel(); ++i) elems.push_back(element_str(cc, i));
    data = fmt::format("[{}]", fmt::join(elems, ", "));
  }
  ValueId id = n.outputs.empty() ? kNoValue : n.outputs[0];
  std::string marks = id >= 0 && id < g.num_values() ? markers(g.value(id)) : "";
  return fmt::format("{} = constant {} {}{}", value_ref(g, id), type_str(c.meta()), data, marks);
}

std::string op_str(const Graph& g, const Node& n) {
  std::vector<std::string> types;
  for (ValueId id : n.outputs)
    types.push_back(id >= 0 && id < g.num_values() ? type_str(g.value(id).meta) + markers(g.value(id)) : "?");
  return fmt::format("{} = {} : {}", results_str(g, n), call_str(g, n), fmt::join(types, ", "));
}

// ---------------------------------------------------------------- lexer

enum class Tok : uint8_t { End, Ident, Value, Int, Float, String, Punct };

struct Token {
  Tok kind = Tok::End;
  std::string text;  // identifier, value name, number lexeme, unescaped string, or the punctuation character
  int line = 0, col = 0;
  bool is(char p) const { return kind == Tok::Punct && text[0] == p; }
  bool is_word(std::string_view w) const { return kind == Tok::Ident && text == w; }
};

std::string printable_char(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  return u < 0x20 || u >= 0x7f ? fmt::format("\\x{:02x}", u) : std::string(1, c);
}

std::string describe(const Token& t) {
  auto clip = [](const std::string& s) { return s.size() > 24 ? s.substr(0, 24) + "..." : s; };
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

  [[noreturn]] void fail(int line, int col, const std::string& msg) const {
    throw Error(fmt::format("{}:{}:{}: {}", file_, line, col, msg));
  }

  Token next() {
    skip_space_and_comments();
    Token t;
    t.line = line_;
    t.col = col_;
    if (done()) return t;
    char c = cur();
    if (is_ident_start(c)) {
      t.kind = Tok::Ident;
      while (!done() && is_ident_char(cur())) t.text += take();
    } else if (is_digit(c)) {
      number(t);
    } else if (c == '%') {
      take();
      t.kind = Tok::Value;
      if (!done() && cur() == '"') {
        take();
        t.text = string_body(t.line, t.col);
      } else {
        while (!done() && is_name_char(cur())) t.text += take();
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
      t.text = std::string(1, take());
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

  void skip_space_and_comments() {
    while (!done()) {
      char c = cur();
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') take();
      else if (c == '#') while (!done() && cur() != '\n') take();
      else break;
    }
  }

  // digits ['.' digits] [('e'|'E') ['+'|'-'] digits]; a sign is a separate '-' token.
  void number(Token& t) {
    t.kind = Tok::Int;
    while (!done() && is_digit(cur())) t.text += take();
    if (at(0) == '.' && is_digit(at(1))) {
      t.kind = Tok::Float;
      t.text += take();
      while (!done() && is_digit(cur())) t.text += take();
    }
    if (at(0) == 'e' || at(0) == 'E') {
      size_t k = (at(1) == '+' || at(1) == '-') ? 2 : 1;
      if (!is_digit(at(k))) fail(t.line, t.col, "malformed number: the exponent needs digits, as in 1e-5");
      t.kind = Tok::Float;
      for (size_t i = 0; i < k; ++i) t.text += take();
      while (!done() && is_digit(cur())) t.text += take();
    }
    if (!done() && (is_name_char(cur())))
      fail(t.line, t.col, fmt::format("malformed number '{}{}'; numbers look like 3, -2, 0.5, 1e-05, inf or nan",
                                      t.text, printable_char(cur())));
  }

  std::string string_body(int line, int col) {
    std::string out;
    while (true) {
      if (done() || cur() == '\n')
        fail(line, col, "unterminated string; close it with '\"' on the same line");
      char c = take();
      if (c == '"') return out;
      if (c == '\\') {
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
      } else {
        out += c;
      }
    }
  }

  std::string_view src_;
  const std::string& file_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
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
  Parser(std::string_view text, const std::string& file) : lex_(text, file), file_(file) {}

  Graph parse() {
    expect_word("graph", "a .kir file starts with 'graph NAME(inputs) {'");
    Token name = take();
    if (name.kind != Tok::Ident && name.kind != Tok::String) unexpected(name, "the graph's name");
    g_.name = name.text;
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
    while (ahead_.size() <= k) ahead_.push_back(lex_.next());
    return ahead_[k];
  }
  Token take() {
    peek();
    last_ = std::move(ahead_.front());
    ahead_.pop_front();
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
  Token expect(char p, std::string_view why) {
    if (!peek().is(p)) unexpected(peek(), fmt::format("'{}' {}", p, why));
    return take();
  }
  void expect_word(std::string_view w, std::string_view why) {
    if (!peek().is_word(w)) unexpected(peek(), fmt::format("'{}' ({})", w, why));
    take();
  }

  // ---- numbers
  int64_t to_int(const Token& t, bool negative) const {
    std::string text = (negative ? "-" : "") + t.text;
    int64_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || p != text.data() + text.size())
      fail_at(t, fmt::format("integer {} does not fit in 64 bits; use a smaller value", text));
    return v;
  }
  template <class F>
  F to_float(const Token& t, bool negative, std::string_view what) const {
    if (t.is_word("inf")) return negative ? -std::numeric_limits<F>::infinity() : std::numeric_limits<F>::infinity();
    if (t.is_word("nan")) return std::numeric_limits<F>::quiet_NaN();
    std::string text = (negative ? "-" : "") + t.text;
    F v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || p != text.data() + text.size())
      fail_at(t, fmt::format("{} is out of range for {}; write inf or -inf if that is meant, or 0.0 for an underflow",
                             text, what));
    return v;
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
  std::vector<int64_t> int_list(char close, std::string_view what) {
    std::vector<int64_t> out;
    if (!peek().is(close)) {
      do {
        if (out.size() >= size_t(kMaxRank)) fail_at(peek(), fmt::format("more than {} dimensions; check the type", kMaxRank));
        out.push_back(bounded_int(what));
      } while (accept(','));
    }
    expect(close, fmt::format("to close the list of {}s", what));
    return out;
  }
  TensorMeta parse_type() {
    Token dt = take();
    if (dt.kind != Tok::Ident) unexpected(dt, "a type such as f32[4, 3]");
    auto dtype = dtype_from_name(dt.text);
    if (!dtype) {
      std::vector<std::string> names;
      for (int i = 0; i < kNumDTypes; ++i) names.emplace_back(dtype_name(DType(i)));
      fail_at(dt, fmt::format("unknown dtype '{}'{}; the dtypes are {}", dt.text, did_you_mean(dt.text, names, false),
                              kDTypeList));
    }
    TensorMeta m;
    m.dtype = *dtype;
    Token open = expect('[', fmt::format("after the dtype {} (a type is written like {}[4, 3])", dt.text, dt.text));
    m.sizes = int_list(']', "size");
    int64_t numel = 1;
    for (int64_t s : m.sizes) {
      if (!grow_numel(numel, s))
        fail_at(open, fmt::format("the shape {} has more than 2^40 elements; check the sizes", shape_str(m.sizes)));
    }
    if (peek().is('{')) {
      Token brace = take();
      m.strides = int_list('}', "stride");
      if (m.strides.size() != m.sizes.size())
        fail_at(brace, fmt::format("{} strides for {} dimensions; write one stride per dimension, or none for a "
                                   "contiguous tensor", m.strides.size(), m.sizes.size()));
    } else {
      m.strides = contiguous_strides(m.sizes);
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
    return m;
  }
  Typed parse_typed() {
    Typed t;
    t.at = peek();
    t.meta = parse_type();
    while (true) {
      if (peek().is_word("grad")) take(), t.grad = true;
      else if (peek().is_word("wrapped")) take(), t.wrapped = true;
      else break;
    }
    return t;
  }

  // ---- names
  void check_new_name(const Token& t) {
    if (auto it = names_.find(t.text); it != names_.end()) {
      const SourceLoc& loc = g_.value(it->second).loc;
      fail_at(t, fmt::format("{} is already defined at line {}:{}; every value gets its own name (SSA)",
                             name_ref(t.text), loc.line, loc.col));
    }
  }
  void define(const Token& t, ValueId id, bool grad, bool wrapped) {
    names_[t.text] = id;
    ValueInfo& v = g_.value(id);
    v.loc = {t.line, t.col};
    v.requires_grad |= grad;
    v.wrapped_number |= wrapped;
  }
  ValueId lookup(const Token& t) {
    if (t.kind != Tok::Value) unexpected(t, "a value such as %x");
    if (auto it = names_.find(t.text); it != names_.end()) return it->second;
    std::vector<std::string> known;
    for (const auto& [n, id] : names_) known.push_back(n);
    std::string hint = did_you_mean(t.text, known, true);
    fail_at(t, fmt::format("{} is used before it is defined{}; define it on an earlier line (a graph lists each value "
                           "before its uses, which also rules out cycles)", name_ref(t.text), hint));
  }

  void parse_input() {
    Token name = take();
    if (name.kind != Tok::Value) unexpected(name, "a graph input such as %x: f32[4, 3]");
    check_new_name(name);
    expect(':', fmt::format("and a type after the input {}", name_ref(name.text)));
    Typed t = parse_typed();
    ValueId id = g_.add_input(name.text, t.meta, t.grad);
    define(name, id, t.grad, t.wrapped);
  }

  void parse_statement() {
    std::vector<Token> names;
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
    std::filesystem::path path(file.text);
    if (path.is_relative()) path = std::filesystem::path(file_).parent_path() / path;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
      fail_at(file, fmt::format("constant file {} does not exist or is not a regular file; it must lie beside the "
                                ".kir (relative paths are resolved against the .kir's directory)", path.string()));
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
    ValueId id = g_.add_constant(name.text, t);
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
      lit.s = take().text;
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
    std::vector<std::optional<Arg>> slots(s.args.size());
    expect('(', fmt::format("after the op name {}", op.name));
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
          if (slots[size_t(i)]) fail_at(key, fmt::format("argument '{}' of {}() is given twice", key.text, op.name));
          slots[size_t(i)] = to_arg(parse_literal(false), op, s.args[size_t(i)]);
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
          slots[positional] = to_arg(parse_literal(false), op, s.args[positional]);
          ++positional;
        }
      } while (accept(','));
    }
    expect(')', fmt::format("to close the argument list of {}", op.name));
    std::vector<Arg> args;
    for (size_t i = 0; i < s.args.size(); ++i) {
      if (slots[i]) {
        args.push_back(std::move(*slots[i]));
      } else if (s.args[i].default_value) {
        args.push_back(arg_from_default(*s.args[i].default_value));
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
      fail_at(op_tok, fmt::format("unknown op '{}'{}; `kiln ops` lists the ops", op_tok.text,
                                  did_you_mean(op_tok.text, all, false)));
    }
    Node n;
    n.kind = NodeKind::Op;
    n.op = op->id;
    n.args = parse_call(*op, op_tok);
    n.loc = {names[0].line, names[0].col};
    std::vector<TensorMeta> metas;
    try {
      metas = infer_meta(bind_node_meta(g_, n));
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
    std::vector<Typed> written;
    if (peek().is(':')) {
      Token colon = take();
      do written.push_back(parse_typed());
      while (accept(','));
      if (written.size() != metas.size())
        fail_at(colon, fmt::format("{} types written for {} results; write one type per result", written.size(),
                                   metas.size()));
      for (size_t k = 0; k < metas.size(); ++k)
        if (!(written[k].meta == metas[k]))
          fail_at(written[k].at, fmt::format("{} is written as {} but {}(...) gives {}; fix the type (or the arguments)",
                                             name_ref(names[k].text), type_str(written[k].meta), op->name,
                                             type_str(metas[k])));
    }
    std::vector<std::string> result_names;
    for (const Token& t : names) result_names.push_back(t.text);
    std::vector<ValueId> ids = g_.add_op(op->id, std::move(n.args), result_names, metas);
    g_.nodes().back().loc = n.loc;
    for (size_t k = 0; k < ids.size(); ++k)
      define(names[k], ids[k], !written.empty() && written[k].grad, !written.empty() && written[k].wrapped);
  }

  Lexer lex_;
  const std::string& file_;
  std::deque<Token> ahead_;
  Token last_;
  Graph g_;
  std::unordered_map<std::string, ValueId> names_;
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

}  // namespace

// ---------------------------------------------------------------- public API

std::string print_graph(const Graph& g, const PrintOptions& opts) {
  std::vector<std::string> params;
  for (ValueId id : g.inputs()) {
    const ValueInfo& v = g.value(id);
    params.push_back(fmt::format("{}: {}{}", name_ref(v.name), type_str(v.meta), markers(v)));
  }
  std::string head = fmt::format("graph {}(", graph_name_str(g.name));
  std::string joined = fmt::format("{}", fmt::join(params, ", "));
  std::string out = head.size() + joined.size() <= 100 || params.empty()
                        ? head + joined + ") {\n"
                        : head + "\n    " + fmt::format("{}", fmt::join(params, ",\n    ")) + ") {\n";
  for (const Node& n : g.nodes())
    out += "  " + (n.kind == NodeKind::Constant ? constant_str(g, n, opts) : op_str(g, n)) + "\n";
  std::vector<std::string> outs;
  for (ValueId id : g.outputs()) outs.push_back(value_ref(g, id));
  out += outs.empty() ? "  return\n" : fmt::format("  return {}\n", fmt::join(outs, ", "));
  return out + "}\n";
}

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

Graph load_graph(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in, "{}: cannot open the file ({}); check the path", path, std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  KILN_CHECK(!in.bad(), "{}: reading the file failed; check that it is a readable file", path);
  return parse_graph(ss.str(), path);
}

void save_graph(const Graph& g, const std::string& path, const PrintOptions& opts) {
  std::string text = print_graph(g, opts);
  std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    KILN_CHECK(out, "{}: cannot write the file ({}); check that the directory exists and is writable", tmp,
               std::strerror(errno));
    out << text;
    out.flush();
    KILN_CHECK(out, "{}: writing failed ({}); check the free disk space", tmp, std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    fail("{}: cannot replace the file ({}); check the permissions", path, ec.message());
  }
}

void verify_graph(const Graph& g, const std::string& filename) {
  const int nv = g.num_values();
  std::vector<char> defined(size_t(nv), 0);
  std::set<std::string> names;
  auto define = [&](ValueId id, const std::string& context, const SourceLoc& loc) {
    KILN_CHECK(id >= 0 && id < nv, "{}: {} defines value #{}, which does not exist; the graph is corrupt",
               where(filename, loc), context, id);
    KILN_CHECK(!defined[size_t(id)], "{}: {} defines {} a second time; every value is defined once (SSA)",
               where(filename, loc), context, value_ref(g, id));
    const ValueInfo& v = g.value(id);
    KILN_CHECK(names.insert(v.name).second, "{}: {} reuses the name {}; value names must be unique",
               where(filename, loc), context, name_ref(v.name));
    defined[size_t(id)] = 1;
  };
  for (ValueId id : g.inputs()) {
    SourceLoc loc = id >= 0 && id < nv ? g.value(id).loc : SourceLoc{};
    define(id, fmt::format("graph input {}", value_ref(g, id)), loc);
    KILN_CHECK(g.value(id).producer == -1, "{}: graph input {} is also recorded as produced by node {}",
               where(filename, loc), value_ref(g, id), g.value(id).producer);
  }
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    std::string what = node_summary(g, n, int(i));
    std::string at = where(filename, n.loc);
    if (n.kind == NodeKind::Constant) {
      KILN_CHECK(n.outputs.size() == 1 && n.constant.defined(), "{}: {}: a constant node holds one defined tensor",
                 at, what);
    } else {
      KILN_CHECK(n.args.size() == n.info().schema.args.size(), "{}: {}: {} arguments, but the schema {} has {}", at,
                 what, n.args.size(), n.info().schema.str(), n.info().schema.args.size());
      for (ValueId id : Graph::node_inputs(n))
        KILN_CHECK(id >= 0 && id < nv && defined[size_t(id)],
                   "{}: {}: reads {} before it is defined; nodes must come after the values they use", at, what,
                   value_ref(g, id));
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      ValueId id = n.outputs[k];
      define(id, what, n.loc);
      KILN_CHECK(g.value(id).producer == int(i) && g.value(id).output_index == int(k),
                 "{}: {}: result {} records producer {} output {}, not node {} output {}; the graph is corrupt", at,
                 what, value_ref(g, id), g.value(id).producer, g.value(id).output_index, i, k);
    }
    if (n.kind == NodeKind::Constant) {
      const TensorMeta& recorded = g.value(n.outputs[0]).meta;
      KILN_CHECK(recorded == n.constant.meta(), "{}: {}: the constant is {} but the graph says {}", at, what,
                 type_str(n.constant.meta()), type_str(recorded));
      continue;
    }
    std::vector<TensorMeta> inferred;
    try {
      inferred = infer_meta(bind_node_meta(g, n));
    } catch (const Error& e) {
      fail("{}: {}: {}", at, what, e.what());
    }
    KILN_CHECK(inferred.size() == n.outputs.size(), "{}: {}: the op produces {} results but the graph records {}", at,
               what, inferred.size(), n.outputs.size());
    for (size_t k = 0; k < inferred.size(); ++k) {
      const TensorMeta& recorded = g.value(n.outputs[k]).meta;
      KILN_CHECK(recorded == inferred[k],
                 "{}: {}: expected {} but the graph says {} for {}; the recorded meta is stale (re-run shape "
                 "inference) or the arguments are wrong",
                 at, what, type_str(inferred[k]), type_str(recorded), value_ref(g, n.outputs[k]));
    }
  }
  for (ValueId id : g.outputs())
    KILN_CHECK(id >= 0 && id < nv && defined[size_t(id)],
               "{}: graph output {} is not defined by an input or a node; return only defined values", filename,
               value_ref(g, id));
}

}  // namespace kiln::graph
