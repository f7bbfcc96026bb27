// Tests of the .npy reader and writer: round trips for every dtype (bf16 as '<u2' bits), strided tensors,
// headers as NumPy writes them (versions 1.0/2.0/3.0, Fortran order), and every malformed-file error.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "eager/npy.h"
#include "eager/loops.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

// A fresh directory under the system temp dir, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() / fmt::format("kiln-npy-test-{}-{}", ::getpid(), counter++);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Bytes of a .npy file with the given header dict text (padded as NumPy pads it) and raw data.
std::string npy_bytes(const std::string& dict, const std::string& data, int major = 1) {
  size_t len_bytes = major == 1 ? 2 : 4;
  std::string header = dict;
  size_t total = 6 + 2 + len_bytes + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  std::string out = "\x93NUMPY";
  out.push_back(char(major));
  out.push_back(0);
  for (size_t i = 0; i < len_bytes; ++i) out.push_back(char((header.size() >> (8 * i)) & 0xff));
  return out + header + data;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

template <class T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// Element bits of a contiguous tensor (so NaN payloads and -0 compare exactly).
std::string tensor_bytes(const Tensor& t) {
  Tensor c = as_contiguous_dtype(t, t.dtype());
  return std::string(static_cast<const char*>(c.data_ptr()), size_t(c.numel() * dtype_size(c.dtype())));
}

// `Error` thrown by `f`, whose message must mention every string in `parts`.
template <class F>
void expect_error(F f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected kiln::Error";
  } catch (const Error& e) {
    std::string m = e.what();
    for (const std::string& p : parts) EXPECT_NE(m.find(p), std::string::npos) << "message: " << m << "\nmissing: " << p;
  }
}

// A tensor of `dt` holding a mix of ordinary and special values.
Tensor sample_tensor(DType dt, const Shape& shape) {
  std::vector<double> values = {0.0, -0.0, 1.5, -2.25, INFINITY, -INFINITY, NAN, 65504.0, 1e-3, 7.0, 100.0, -1.0};
  Tensor t = Tensor::empty(shape, dt);
  Tensor src = Tensor::empty(shape, DType::F64);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = values[size_t(i) % values.size()];
    if (!is_floating(dt)) v = std::isfinite(v) ? std::fmod(std::abs(v), 100.0) : 3.0;
    src.data<double>()[i] = v;
  }
  copy_into(t, src);
  return t;
}

const DType kAllDTypes[] = {DType::Bool, DType::U8, DType::I8, DType::I16, DType::I32,
                            DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64};

}  // namespace

TEST(Npy, RoundTripsEveryDType) {
  TempDir dir;
  for (DType dt : kAllDTypes) {
    for (const Shape& shape : {Shape{2, 3}, Shape{}, Shape{0, 4}, Shape{12}, Shape{1, 2, 1, 3}}) {
      Tensor t = sample_tensor(dt, shape);
      std::string path = dir.file(fmt::format("{}.npy", dtype_name(dt)));
      write_npy(path, t);
      Tensor back = read_npy(path, dt == DType::BF16 ? std::optional<DType>(DType::BF16) : std::nullopt);
      EXPECT_EQ(back.dtype(), dt) << dtype_name(dt);
      EXPECT_EQ(back.sizes(), shape) << dtype_name(dt);
      EXPECT_TRUE(back.is_contiguous());
      EXPECT_EQ(tensor_bytes(back), tensor_bytes(t)) << dtype_name(dt) << " " << shape_str(shape);
    }
  }
}

TEST(Npy, WritesTheHeaderNumPyWrites) {
  TempDir dir;
  std::string path = dir.file("a.npy");
  write_npy(path, Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  std::string bytes = read_bytes(path);
  std::string expected = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                                   raw(std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(bytes, expected);
  EXPECT_EQ((bytes.size() - 24) % 64, 0u);  // the preamble is 64-byte aligned

  write_npy(path, Tensor::from_vector<int64_t>({7}, {1}));
  EXPECT_NE(read_bytes(path).find("'shape': (1,)"), std::string::npos);
  write_npy(path, Tensor::from_vector<int64_t>({7}, {}));
  EXPECT_NE(read_bytes(path).find("'shape': ()"), std::string::npos);
  write_npy(path, sample_tensor(DType::BF16, {2}));
  EXPECT_NE(read_bytes(path).find("'descr': '<u2'"), std::string::npos);
  write_npy(path, sample_tensor(DType::Bool, {2}));
  EXPECT_NE(read_bytes(path).find("'descr': '|b1'"), std::string::npos);
}

TEST(Npy, WritesStridedTensorsInLogicalOrder) {
  TempDir dir;
  // a transposed 2x3 tensor: storage [0..5] seen as [[0, 3], [1, 4], [2, 5]]
  Tensor base = Tensor::from_vector<double>({0, 1, 2, 3, 4, 5}, {6});
  Tensor transposed = make_view(base, {3, 2}, {1, 3}, 0);
  write_npy(dir.file("t.npy"), transposed);
  Tensor back = read_npy(dir.file("t.npy"));
  EXPECT_EQ(back.sizes(), (Shape{3, 2}));
  EXPECT_EQ(back.to_double_vector(), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  // a stepped slice with an offset
  Tensor stepped = make_view(base, {2}, {2}, 1);
  write_npy(dir.file("s.npy"), stepped);
  EXPECT_EQ(read_npy(dir.file("s.npy")).to_double_vector(), (std::vector<double>{1, 3}));
  // a broadcast (stride 0) view
  Tensor expanded = make_view(base, {2, 3}, {0, 1}, 2);
  write_npy(dir.file("e.npy"), expanded);
  EXPECT_EQ(read_npy(dir.file("e.npy")).to_double_vector(), (std::vector<double>{2, 3, 4, 2, 3, 4}));
}

TEST(Npy, ReadsFortranOrder) {
  TempDir dir;
  // numpy.asfortranarray([[1, 2, 3], [4, 5, 6]]) stores the columns one after another
  write_bytes(dir.file("f.npy"), npy_bytes("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }",
                                           raw(std::vector<int32_t>{1, 4, 2, 5, 3, 6})));
  Tensor t = read_npy(dir.file("f.npy"));
  EXPECT_EQ(t.dtype(), DType::I32);
  EXPECT_EQ(t.sizes(), (Shape{2, 3}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.to_double_vector(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  write_bytes(dir.file("f3.npy"), npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 1, 2), }",
                                            raw(std::vector<double>{1, 3, 2, 4})));
  EXPECT_EQ(read_npy(dir.file("f3.npy")).to_double_vector(), (std::vector<double>{1, 2, 3, 4}));
}

TEST(Npy, ReadsVersions2And3AndHeaderVariants) {
  TempDir dir;
  std::string data = raw(std::vector<double>{1.5, -2.5});
  for (int major : {2, 3}) {
    write_bytes(dir.file("v.npy"), npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", data, major));
    EXPECT_EQ(read_npy(dir.file("v.npy")).to_double_vector(), (std::vector<double>{1.5, -2.5})) << major;
  }
  // key order, double quotes, no trailing comma, '=' byte order, '<' on a one-byte type
  write_bytes(dir.file("k.npy"), npy_bytes("{\"shape\": (2,), \"fortran_order\": False, \"descr\": \"=f8\"}", data));
  EXPECT_EQ(read_npy(dir.file("k.npy")).to_double_vector(), (std::vector<double>{1.5, -2.5}));
  write_bytes(dir.file("b.npy"), npy_bytes("{'descr': '<b1', 'fortran_order': False, 'shape': (3,), }",
                                           std::string("\x01\x00\x02", 3)));
  Tensor b = read_npy(dir.file("b.npy"));
  EXPECT_EQ(b.dtype(), DType::Bool);
  EXPECT_EQ(b.to_double_vector(), (std::vector<double>{1, 0, 1}));  // any nonzero byte is true
}

TEST(Npy, ReadsBFloat16BitsOnlyWhenAsked) {
  TempDir dir;
  write_bytes(dir.file("u2.npy"), npy_bytes("{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }",
                                            raw(std::vector<uint16_t>{0x3fc0, 0xff80})));  // 1.5, -inf
  Tensor t = read_npy(dir.file("u2.npy"), DType::BF16);
  EXPECT_EQ(t.dtype(), DType::BF16);
  EXPECT_EQ(t.to_double_vector(), (std::vector<double>{1.5, -INFINITY}));
  expect_error([&] { read_npy(dir.file("u2.npy")); }, {"u2.npy", "'<u2'", "bf16"});
  expect_error([&] { read_npy(dir.file("u2.npy"), DType::F16); }, {"u2.npy", "bf16"});
}

TEST(Npy, ChecksTheExpectedDType) {
  TempDir dir;
  write_npy(dir.file("f.npy"), Tensor::from_vector<float>({1}, {1}));
  EXPECT_EQ(read_npy(dir.file("f.npy"), DType::F32).dtype(), DType::F32);
  expect_error([&] { read_npy(dir.file("f.npy"), DType::F64); }, {"f.npy", "f32", "f64"});
}

TEST(Npy, RejectsMalformedFiles) {
  TempDir dir;
  std::string good_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  std::string two_floats = raw(std::vector<float>{1, 2});
  std::string good = npy_bytes(good_dict, two_floats);
  std::vector<std::pair<std::string, std::pair<std::string, std::vector<std::string>>>> cases = {
      {"magic.npy", {"PK\x03\x04 not numpy at all", {"bad magic"}}},
      {"empty.npy", {"", {"bad magic"}}},
      {"version.npy", {std::string("\x93NUMPY\x04\x00", 8) + good.substr(8), {"version 4.0"}}},
      {"header.npy", {good.substr(0, 30), {"truncated header"}}},
      {"data.npy", {good.substr(0, good.size() - 3), {"truncated data", "8 bytes"}}},
      {"extra.npy", {good + "xx", {"size mismatch"}}},
      {"bigendian.npy", {npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", two_floats),
                         {"big-endian", "'>f4'"}}},
      {"complex.npy", {npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", two_floats),
                       {"unsupported dtype", "'<c8'"}}},
      {"u4.npy", {npy_bytes("{'descr': '<u4', 'fortran_order': False, 'shape': (2,), }", two_floats),
                  {"unsupported dtype", "'<u4'"}}},
      {"structured.npy", {npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", two_floats),
                          {"malformed header"}}},
      {"nokey.npy", {npy_bytes("{'descr': '<f4', 'shape': (2,), }", two_floats), {"'fortran_order'"}}},
      {"extrakey.npy", {npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 'y', }", two_floats),
                        {"keys other than"}}},
      {"negative.npy", {npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", two_floats),
                        {"negative dimension"}}},
      {"garbage.npy", {npy_bytes("{'descr': '<f4', 'fortran_order': maybe, 'shape': (2,), }", two_floats),
                       {"malformed header"}}},
  };
  for (const auto& [name, spec] : cases) {
    SCOPED_TRACE(name);
    write_bytes(dir.file(name), spec.first);
    try {
      read_npy(dir.file(name));
      ADD_FAILURE() << "expected kiln::Error";
    } catch (const Error& e) {
      std::string m = e.what();
      EXPECT_NE(m.find(name), std::string::npos) << m;
      for (const std::string& p : spec.second) EXPECT_NE(m.find(p), std::string::npos) << m << "\nmissing: " << p;
    }
  }
  expect_error([&] { read_npy(dir.file("missing.npy")); }, {"cannot open", "missing.npy"});
}

TEST(Npy, WritesAtomically) {
  TempDir dir;
  std::string path = dir.file("a.npy");
  write_npy(path, Tensor::from_vector<float>({1, 2}, {2}));
  write_npy(path, Tensor::from_vector<double>({3}, {1}));  // replaces the file
  EXPECT_EQ(read_npy(path).to_double_vector(), (std::vector<double>{3}));
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "a.npy");  // no temporary file left behind
  }
  EXPECT_EQ(files, 1);
  expect_error([&] { write_npy(dir.file("no/such/dir/b.npy"), Tensor::from_vector<float>({1}, {1})); },
               {"cannot create", "b.npy"});
  expect_error([&] { write_npy(dir.file("m.npy"), Tensor::meta({DType::F32, {2}, {1}, {}})); }, {"meta tensor"});
  expect_error([&] { write_npy(dir.file("u.npy"), Tensor()); }, {"undefined"});
}

RC_GTEST_PROP(Npy, RandomShapesAndValuesRoundTrip, ()) {
  TempDir dir;
  const auto dt = *rc::gen::element(DType::U8, DType::I16, DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64);
  const auto shape = *rc::gen::container<std::vector<int64_t>>(*rc::gen::inRange(0, 4), rc::gen::inRange<int64_t>(0, 4));
  Tensor t = Tensor::empty(shape, dt);
  auto bits = *rc::gen::container<std::vector<uint8_t>>(size_t(t.numel() * dtype_size(dt)), rc::gen::arbitrary<uint8_t>());
  if (!bits.empty()) std::memcpy(t.data_ptr(), bits.data(), bits.size());
  write_npy(dir.file("p.npy"), t);
  Tensor back = read_npy(dir.file("p.npy"), dt);
  RC_ASSERT(back.sizes() == t.sizes());
  RC_ASSERT(tensor_bytes(back) == tensor_bytes(t));
}
