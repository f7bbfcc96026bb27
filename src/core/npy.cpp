// NumPy .npy reader and writer over raw buffers: the header (a Python dict literal with 'descr',
// 'fortran_order' and 'shape') is parsed by a small literal parser; the data is read straight into the
// buffer the caller allocates (eager/npy.h: a tensor's storage).
#include "core/npy.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/ranges.h>

#include "core/error.h"
#include "core/files.h"

namespace kiln {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kHeaderAlign = 64;  // NumPy pads the whole preamble to a multiple of 64 bytes

// The NumPy type string kiln writes for each dtype (bf16 as raw 16-bit bits).
std::string_view npy_descr(DType dt) {
  switch (dt) {
    case DType::Bool: return "|b1";
    case DType::U8: return "|u1";
    case DType::I8: return "|i1";
    case DType::I16: return "<i2";
    case DType::I32: return "<i4";
    case DType::I64: return "<i8";
    case DType::F16: return "<f2";
    case DType::BF16: return "<u2";
    case DType::F32: return "<f4";
    case DType::F64: return "<f8";
  }
  return "";
}

// The kiln dtype of a NumPy type string ('u2' maps to nothing: kiln has no uint16; see read_npy's `as`).
std::optional<DType> dtype_of_descr(char kind, int size) {
  switch (kind) {
    case 'b': if (size == 1) return DType::Bool; break;
    case 'u': if (size == 1) return DType::U8; break;
    case 'i':
      if (size == 1) return DType::I8;
      if (size == 2) return DType::I16;
      if (size == 4) return DType::I32;
      if (size == 8) return DType::I64;
      break;
    case 'f':
      if (size == 2) return DType::F16;
      if (size == 4) return DType::F32;
      if (size == 8) return DType::F64;
      break;
    default: break;
  }
  return std::nullopt;
}

// One value of the header dict: a string, a bool, or a tuple of ints.
struct HeaderValue {
  enum class Kind { Str, Bool, Tuple } kind = Kind::Str;
  std::string str;
  bool boolean = false;
  std::vector<int64_t> tuple;
};

// Parses the Python dict literal NumPy writes, e.g. "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }".
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& path) : s_(text), path_(path) {}

  std::map<std::string, HeaderValue> parse_dict() {
    std::map<std::string, HeaderValue> dict;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') { ++pos_; break; }
      std::string key = parse_string();
      expect(':');
      KILN_CHECK(!dict.count(key), "read_npy: {}: header repeats the key '{}'", path_, key);
      dict[key] = parse_value();
      skip_space();
      if (peek() == ',') { ++pos_; continue; }
      expect('}');
      break;
    }
    skip_space();
    KILN_CHECK(pos_ == s_.size(), "read_npy: {}: unexpected text after the header dict at column {}", path_, pos_);
    return dict;
  }

 private:
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_space() { while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_; }
  [[noreturn]] void bad(std::string_view what) const {
    fail("read_npy: {}: malformed header: expected {} at column {} in \"{}\"", path_, what, pos_, s_);
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) bad(fmt::format("'{}'", c));
    ++pos_;
  }
  std::string parse_string() {
    skip_space();
    char quote = peek();
    if (quote != '\'' && quote != '"') bad("a quoted string");
    size_t end = s_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) bad("a closing quote");
    std::string out(s_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return out;
  }
  int64_t parse_int() {
    skip_space();
    size_t start = pos_;
    if (peek() == '-') ++pos_;
    while (std::isdigit(static_cast<unsigned char>(peek()))) ++pos_;
    if (pos_ == start || (pos_ == start + 1 && s_[start] == '-')) bad("an integer");
    std::string digits(s_.substr(start, pos_ - start));
    try {
      return std::stoll(digits);
    } catch (const std::exception&) {
      bad("an integer that fits in 64 bits");
    }
  }
  HeaderValue parse_value() {
    skip_space();
    HeaderValue v;
    char c = peek();
    if (c == '\'' || c == '"') {
      v.kind = HeaderValue::Kind::Str;
      v.str = parse_string();
    } else if (s_.substr(pos_, 4) == "True") {
      v.kind = HeaderValue::Kind::Bool;
      v.boolean = true;
      pos_ += 4;
    } else if (s_.substr(pos_, 5) == "False") {
      v.kind = HeaderValue::Kind::Bool;
      pos_ += 5;
    } else if (c == '(') {
      v.kind = HeaderValue::Kind::Tuple;
      ++pos_;
      while (true) {
        skip_space();
        if (peek() == ')') { ++pos_; break; }
        v.tuple.push_back(parse_int());
        skip_space();
        if (peek() == ',') { ++pos_; continue; }
        expect(')');
        break;
      }
    } else {
      bad("a string, True, False or a tuple");
    }
    return v;
  }

  std::string_view s_;
  const std::string& path_;
  size_t pos_ = 0;
};

uint32_t read_le(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

NpyHeader parse_header(std::string_view text, const std::string& path, std::optional<DType> as) {
  std::map<std::string, HeaderValue> dict = HeaderParser(text, path).parse_dict();
  for (const char* key : {"descr", "fortran_order", "shape"})
    KILN_CHECK(dict.count(key), "read_npy: {}: header has no '{}' key: \"{}\"", path, key, text);
  KILN_CHECK(dict.size() == 3, "read_npy: {}: header has keys other than 'descr', 'fortran_order' and 'shape' "
             "(numpy.load rejects such files too): \"{}\"", path, text);
  const HeaderValue& descr = dict["descr"];
  const HeaderValue& fortran = dict["fortran_order"];
  const HeaderValue& shape = dict["shape"];
  KILN_CHECK(descr.kind == HeaderValue::Kind::Str, "read_npy: {}: 'descr' must be a type string such as '<f4' "
             "(structured dtypes are not supported)", path);
  KILN_CHECK(fortran.kind == HeaderValue::Kind::Bool, "read_npy: {}: 'fortran_order' must be True or False", path);
  KILN_CHECK(shape.kind == HeaderValue::Kind::Tuple, "read_npy: {}: 'shape' must be a tuple of ints", path);

  NpyHeader h;
  h.fortran_order = fortran.boolean;
  for (int64_t d : shape.tuple) {
    KILN_CHECK(d >= 0, "read_npy: {}: negative dimension {} in shape", path, d);
    h.shape.push_back(d);
  }
  const std::string& s = descr.str;
  KILN_CHECK(s.size() >= 3 && (s[0] == '<' || s[0] == '>' || s[0] == '|' || s[0] == '='),
             "read_npy: {}: unsupported dtype '{}' (kiln reads bool, u8, i8, i16, i32, i64, f16, f32, f64, and "
             "'<u2' as bf16 bits)", path, s);
  std::optional<int> parsed_size = parse_number<int>(std::string_view(s).substr(2));
  KILN_CHECK(parsed_size.has_value(), "read_npy: {}: unsupported dtype '{}' (kiln reads bool, u8, i8, i16, i32, i64, "
             "f16, f32, f64, and '<u2' as bf16 bits)", path, s);
  const int size = *parsed_size;
  KILN_CHECK(s[0] != '>' || size == 1, "read_npy: {}: big-endian data ('{}') is not supported; convert it with "
             "arr.astype(arr.dtype.newbyteorder('<'))", path, s);
  if (s[1] == 'u' && size == 2) {
    KILN_CHECK(as == DType::BF16, "read_npy: {}: '<u2' data: kiln has no uint16 dtype; if the file holds "
               "bfloat16 bits, read it with as = bf16", path);
    h.dtype = DType::BF16;
    h.raw_u16 = true;
    return h;
  }
  std::optional<DType> dt = dtype_of_descr(s[1], size);
  KILN_CHECK(dt.has_value(), "read_npy: {}: unsupported dtype '{}' (kiln reads bool, u8, i8, i16, i32, i64, f16, "
             "f32, f64, and '<u2' as bf16 bits)", path, s);
  KILN_CHECK(!as || *as == *dt, "read_npy: {}: the file holds {} data but {} was expected", path, dtype_name(*dt),
             dtype_name(*as));
  h.dtype = *dt;
  return h;
}

std::string header_text(DType dtype, const std::vector<int64_t>& sizes) {
  std::string shape = "(";
  for (size_t i = 0; i < sizes.size(); ++i) shape += fmt::format("{}, ", sizes[i]);
  if (sizes.size() > 1) shape.resize(shape.size() - 2);
  else if (sizes.size() == 1) shape.resize(shape.size() - 1);  // "(3,)"
  shape += ")";
  return fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", npy_descr(dtype), shape);
}

std::string shape_text(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

}  // namespace

NpyHeader read_npy_file(const std::string& path, std::optional<DType> as, const NpyAllocate& allocate) {
  InputFile in(path, ".npy file", kMaxNpyFileBytes);
  std::array<unsigned char, 8> pre{};
  KILN_CHECK(in.read(pre.data(), 8) == 8 && std::memcmp(pre.data(), kMagic, kMagicLen) == 0,
             "read_npy: {}: not a .npy file (bad magic; expected \\x93NUMPY)", path);
  int major = pre[6];
  KILN_CHECK(major >= 1 && major <= 3, "read_npy: {}: unsupported .npy format version {}.{} (kiln reads 1.0, 2.0 "
             "and 3.0)", path, major, int(pre[7]));
  int len_bytes = major == 1 ? 2 : 4;
  std::array<unsigned char, 4> len_buf{};
  KILN_CHECK(in.read(len_buf.data(), len_bytes) == len_bytes, "read_npy: {}: truncated header", path);
  uint32_t header_len = read_le(len_buf.data(), len_bytes);
  const int64_t preamble = 8 + len_bytes;
  KILN_CHECK(int64_t(header_len) <= in.size() - preamble, "read_npy: {}: truncated header ({} of {} bytes)", path,
             in.size() - preamble, header_len);
  std::string text(header_len, '\0');
  in.read(text.data(), header_len);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\0')) text.pop_back();
  NpyHeader h = parse_header(text, path, as);

  // The data must be exactly what the shape needs; checked against the file's size before allocating, so a
  // small file that claims a huge shape is an error rather than an allocation failure.
  int64_t numel = 1;
  for (int64_t d : h.shape)
    KILN_CHECK(!__builtin_mul_overflow(numel, d, &numel), "read_npy: {}: the shape {} has too many elements", path,
               shape_text(h.shape));
  int64_t bytes = 0;
  KILN_CHECK(!__builtin_mul_overflow(numel, int64_t(dtype_size(h.dtype)), &bytes), "read_npy: {}: the shape {} has "
             "too many elements", path, shape_text(h.shape));
  const int64_t have = in.size() - preamble - int64_t(header_len);
  KILN_CHECK(have >= bytes, "read_npy: {}: truncated data: shape {} of {} needs {} bytes but the file has {}", path,
             shape_text(h.shape), dtype_name(h.dtype), bytes, have);
  KILN_CHECK(have == bytes, "read_npy: {}: size mismatch: the file has more data than shape {} of {} needs ({} "
             "bytes)", path, shape_text(h.shape), dtype_name(h.dtype), bytes);

  void* data = allocate(h);
  int64_t got = bytes > 0 ? in.read(data, bytes) : 0;
  KILN_CHECK(got == bytes, "read_npy: {}: truncated data: shape {} of {} needs {} bytes but the file has {}", path,
             shape_text(h.shape), dtype_name(h.dtype), bytes, got);
  if (h.dtype == DType::Bool) {  // normalise to 0/1 so every byte is a valid bool
    auto* p = static_cast<unsigned char*>(data);
    for (int64_t i = 0; i < bytes; ++i) p[i] = p[i] != 0;
  }
  return h;
}

void write_npy_file(const std::string& path, DType dtype, const std::vector<int64_t>& sizes, const void* data) {
  std::string header = header_text(dtype, sizes);
  // Pad with spaces so that magic + version + length + header + '\n' is a multiple of 64 bytes.
  auto pad_header = [&](size_t len_bytes) {
    size_t total = kMagicLen + 2 + len_bytes + header.size() + 1;
    return header + std::string((kHeaderAlign - total % kHeaderAlign) % kHeaderAlign, ' ') + "\n";
  };
  size_t len_bytes = 2;
  std::string padded = pad_header(len_bytes);
  if (padded.size() > 65535) {  // version 2.0: the header does not fit a 16-bit length
    len_bytes = 4;
    padded = pad_header(len_bytes);
  }

  write_file_atomic(path, [&](const ChunkWriter& write) {
    write(kMagic, kMagicLen);
    char version[2] = {char(len_bytes == 2 ? 1 : 2), 0};
    write(version, 2);
    uint32_t n = uint32_t(padded.size());
    char len[4];
    for (size_t i = 0; i < len_bytes; ++i) len[i] = char((n >> (8 * i)) & 0xff);
    write(len, len_bytes);
    write(padded.data(), padded.size());
    int64_t bytes = int64_t(dtype_size(dtype));
    for (int64_t d : sizes) bytes *= d;
    if (bytes > 0) write(data, size_t(bytes));
  });
}

}  // namespace kiln
