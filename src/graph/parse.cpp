// The .kir parser (grammar: docs/kir-format.md): recursive descent over the lexer's tokens (lexer.h), turning
// every malformed input into a kiln::Error "file:line:col: what is wrong; what to do". Each op node gets the
// verifier's node check (argument binding and shape inference) as it is read, so parsing infers each node once
// and the parsed graph passes verify_graph without a second pass. It runs once per node of every graph a tool
// loads, so it avoids per-node temporaries: tokens view the source, names resolve through the graph's flat name
// index, and error messages are only built when a check fails.
#include "graph/text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "core/files.h"
#include "eager/npy.h"
#include "graph/lexer.h"
#include "graph/printer.h"
#include "ops/api.h"
#include "ops/dispatch.h"

namespace kiln::graph {
namespace kir {
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

// The argument a schema default stands for (the printer omits an argument equal to its default).
Arg arg_from_default(const IValue& v) {
  if (v.is_scalar()) return v.scalar();
  if (v.is_int_list()) return v.int_list();
  if (v.is_dtype()) return v.dtype();
  if (v.is_string()) return v.string();
  return std::monostate{};
}

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

}  // namespace
}  // namespace kir

Graph parse_graph(std::string_view text, const std::string& filename) {
  kir::Parser p(text, filename);
  try {
    return p.parse();
  } catch (const Error& e) {
    // Errors raised below the parser (tensor allocation, graph construction) get the location they arose at.
    if (std::string_view(e.what()).starts_with(filename + ":")) throw;
    p.fail_at(p.last(), e.what());
  }
}

Graph load_graph(const std::string& path) { return parse_graph(read_input_file(path, "graph file"), path); }

}  // namespace kiln::graph
