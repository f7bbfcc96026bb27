// Numerics: every pointwise op of the table on special values (+-0, +-inf, NaN, denormals, each dtype's
// extremes, the edges of each op's domain), compiled (inductor) against eager and eager against PyTorch's answers
// recorded in tests/golden/special_values.json (tests/golden/gen_special_values.py); and reductions that stay
// accurate at scale (long and expanded sums, variance and normalisation of rows of equal large values).
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/half.h"
#include "core/options.h"
#include "graph/graph.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "inductor/compile.h"
#include "op_samples.h"
#include "ops/api.h"
#include "ops/dispatch.h"

namespace kiln {
namespace {

using json = nlohmann::json;

// Every test process compiles into its own kernel cache directory.
struct NumericsCacheDir : ::testing::Environment {
  void SetUp() override {
    dir = std::filesystem::temp_directory_path() / fmt::format("kiln-numerics-cache-{}", ::getpid());
    set_option(Opt::CacheDir, dir.string());
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::filesystem::path dir;
};
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new NumericsCacheDir);

// ---------------------------------------------------------------- elements as bits and values

uint64_t element_bits(const Tensor& t, int64_t i) {
  uint64_t b = 0;
  const int64_t size = dtype_size(t.dtype());
  std::memcpy(&b, static_cast<const char*>(t.data_ptr()) + i * t.strides()[0] * size, size_t(size));
  return b;
}
double element_value(const Tensor& t, int64_t i) {
  const uint64_t b = element_bits(t, i);
  switch (t.dtype()) {
    case DType::F64: { double d; std::memcpy(&d, &b, 8); return d; }
    case DType::F32: { float f; uint32_t u = uint32_t(b); std::memcpy(&f, &u, 4); return f; }
    case DType::F16: { Half h; std::memcpy(&h, &b, 2); return float(h); }
    case DType::BF16: { BFloat16 h; std::memcpy(&h, &b, 2); return float(h); }
    case DType::Bool: case DType::U8: return double(b);
    default: {
      const int bits = int(dtype_size(t.dtype()) * 8);
      const int64_t v = bits == 64 ? int64_t(b) : int64_t(b << (64 - bits)) >> (64 - bits);
      return double(v);
    }
  }
}
// Floats as integers that order like the values (+0 and -0 both 0): their difference counts ulps.
int64_t ordered_key(uint64_t bits, DType dt) {
  const int width = int(dtype_size(dt) * 8);
  const uint64_t sign = uint64_t(1) << (width - 1);
  return (bits & sign) ? -int64_t(bits & (sign - 1)) : int64_t(bits);
}

// A tensor of dtype `dt` from the golden file's hex digits (each element's bits, most significant first).
Tensor decode(const std::string& hex, DType dt) {
  const size_t width = size_t(dtype_size(dt)) * 2;
  const int64_t n = int64_t(hex.size() / width);
  Tensor t = Tensor::empty({n}, dt);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t b = std::stoull(hex.substr(size_t(i) * width, width), nullptr, 16);
    std::memcpy(static_cast<char*>(t.data_ptr()) + i * dtype_size(dt), &b, size_t(dtype_size(dt)));
  }
  return t;
}
DType dtype_named(const std::string& name) {
  std::optional<DType> dt = dtype_from_name(name);
  if (!dt) throw std::runtime_error("special_values.json: unknown dtype " + name);
  return *dt;
}

// ---------------------------------------------------------------- the golden file

struct SpecialCase {
  std::string op, dtype;
  json attrs;
  std::vector<Tensor> columns;     // one per tensor argument: its value at every element of the grid
  std::optional<std::string> error;
  DType out_dtype = DType::F32;
  Tensor out;                      // PyTorch's vectorised answers
  std::map<int64_t, Tensor> scalar;  // elements where PyTorch's scalar path answers differently (1 element each)
  std::set<int64_t> error_elements;  // elements PyTorch refuses (integer division by zero)
  std::string str() const { return fmt::format("{} {} {}", op, attrs.dump(), dtype); }
};

// The cartesian product of the argument value lists, row-major (the last argument varies fastest).
std::vector<Tensor> grid_columns(const std::vector<Tensor>& lists) {
  int64_t n = 1;
  for (const Tensor& l : lists) n *= l.numel();
  std::vector<Tensor> cols;
  int64_t inner = n;
  for (const Tensor& l : lists) {
    inner /= l.numel();
    std::vector<int64_t> idx(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) idx[size_t(i)] = (i / inner) % l.numel();
    cols.push_back(index_select(l, 0, Tensor::from_vector<int64_t>(idx, {n})));
  }
  return cols;
}

const std::vector<SpecialCase>& special_cases() {
  static const std::vector<SpecialCase> cases = [] {
    std::ifstream in(std::string(KILN_SOURCE_DIR) + "/tests/golden/special_values.json");
    json doc = json::parse(in);
    std::vector<SpecialCase> out;
    for (const json& c : doc["cases"]) {
      SpecialCase s;
      s.op = c["op"];
      s.dtype = c["dtype"];
      s.attrs = c["attrs"];
      std::vector<Tensor> lists;
      for (size_t i = 0; i < c["inputs"].size(); ++i)
        lists.push_back(decode(c["inputs"][i], dtype_named(c["input_dtypes"][i])));
      s.columns = grid_columns(lists);
      if (c.contains("error")) {
        s.error = c["error"].get<std::string>();
      } else {
        s.out_dtype = dtype_named(c["out_dtype"]);
        s.out = decode(c["out"], s.out_dtype);
        for (const auto& [k, v] : c["scalar"].items()) s.scalar[std::stoll(k)] = decode(v, s.out_dtype);
        for (const json& e : c["error_elements"]) s.error_elements.insert(e.get<int64_t>());
      }
      out.push_back(std::move(s));
    }
    return out;
  }();
  return cases;
}

// The pointwise ops of the table: kind Pointwise, and the Composite rows of the pointwise family.
std::vector<std::string> pointwise_op_names() {
  std::vector<std::string> names;
  for (const OpInfo& op : all_ops())
    if (op.kind == OpKind::Pointwise || (op.family == "pointwise" && op.kind == OpKind::Composite))
      names.emplace_back(op.name);
  return names;
}

// ---------------------------------------------------------------- running a case both ways

std::map<std::string, IValue> attribute_kwargs(const json& attrs) {
  std::map<std::string, IValue> kw;
  for (const auto& [k, v] : attrs.items()) {
    if (k == "dtype") kw[k] = dtype_named(v.get<std::string>());
    else if (v.is_string()) kw[k] = v.get<std::string>();
    else if (v.is_number_integer()) kw[k] = Scalar(v.get<int64_t>());
    else if (v.is_boolean()) kw[k] = Scalar(v.get<bool>());
    else kw[k] = Scalar(v.get<double>());
  }
  return kw;
}

Tensor run_eager(const std::string& op, const std::vector<Tensor>& inputs, const json& attrs) {
  std::vector<IValue> positional(inputs.begin(), inputs.end());
  return call_op_named(op, positional, attribute_kwargs(attrs))[0];
}

// The op as a one-node graph (its tensor arguments graph inputs), compiled.
Tensor run_compiled(const std::string& op_name, const std::vector<Tensor>& inputs, const json& attrs) {
  const OpInfo& op = *find_op(op_name);
  std::vector<IValue> positional(inputs.begin(), inputs.end());
  OpCall call = bind_args(op, positional, attribute_kwargs(attrs));
  graph::Graph g;
  std::vector<graph::Arg> args;
  for (const IValue& v : call.args) {
    if (v.is_none()) args.emplace_back(std::monostate{});
    else if (v.is_tensor()) args.emplace_back(graph::TensorArg{g.add_input(g.fresh_name("x"), v.tensor().meta())});
    else if (v.is_scalar()) args.emplace_back(v.scalar());
    else if (v.is_int_list()) args.emplace_back(v.int_list());
    else if (v.is_dtype()) args.emplace_back(v.dtype());
    else args.emplace_back(v.string());
  }
  g.set_outputs(g.add_op(op.id, args));
  return (*compile(g))(inputs)[0];
}

// How far compiled results may lie from eager's, in ulps of the result dtype (and the same multiple of the
// dtype's epsilon, scaled by the largest input, absolutely, for results formed by cancellation: gelu's
// 1 + erf(x) in the left tail). Ops not listed are exact: the same operations in the same order, bit for bit.
// The bounds come from glibc's libmvec (at most 4 ulp, the vector variants compiled loops call) against libm's
// scalar functions (eager), docs/inductor.md "Special values and accuracy".
int ulp_bound(const std::string& op) {
  static const std::set<std::string> vector_math = {"exp", "exp2", "log", "log2", "log1p", "expm1", "sin", "cos", "tan",
                                                    "tanh", "asin", "acos", "atan", "sinh", "cosh", "erf", "sigmoid",
                                                    "silu", "gelu", "pow", "atan2"};
  if (vector_math.count(op)) return 4;
  if (op == "lerp") return 2;  // eager's kernel rounds once (an FMA), the decomposition twice
  return 0;
}

double epsilon_of(DType dt) {
  switch (dt) {
    case DType::F64: return 0x1p-52;
    case DType::F16: return 0x1p-10;
    case DType::BF16: return 0x1p-7;
    default: return 0x1p-23;
  }
}

// Whether two answers agree: the same bits, both NaN (payloads are not compared), or for floats within `ulps`
// ulps (or ulps * eps * scale absolutely).
bool agree(uint64_t a, uint64_t b, DType dt, int ulps, double va, double vb, double scale) {
  if (a == b) return true;
  if (!is_floating(dt)) return false;
  if (std::isnan(va) || std::isnan(vb)) return std::isnan(va) && std::isnan(vb);
  if (ulps == 0) return false;
  if (std::isinf(va) || std::isinf(vb)) return false;
  return std::llabs(ordered_key(a, dt) - ordered_key(b, dt)) <= ulps ||
         std::abs(va - vb) <= ulps * epsilon_of(dt) * std::max(1.0, scale);
}

std::string describe_inputs(const std::vector<Tensor>& cols, int64_t i) {
  std::string s;
  for (const Tensor& c : cols) s += fmt::format("{}{:.9g}", s.empty() ? "" : ", ", element_value(c, i));
  return "(" + s + ")";
}
double largest_input(const std::vector<Tensor>& cols, int64_t i) {
  double m = 0;
  for (const Tensor& c : cols) m = std::max(m, std::abs(element_value(c, i)));
  return std::isfinite(m) ? m : 0;
}

// Elements `rows` of the case's grid (every element PyTorch answers when empty).
std::vector<int64_t> answered_elements(const SpecialCase& c) {
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < c.columns[0].numel(); ++i)
    if (!c.error_elements.count(i)) rows.push_back(i);
  return rows;
}
std::vector<Tensor> gather_rows(const std::vector<Tensor>& cols, const std::vector<int64_t>& rows) {
  std::vector<Tensor> out;
  Tensor idx = Tensor::from_vector<int64_t>(rows, {int64_t(rows.size())});
  for (const Tensor& c : cols) out.push_back(index_select(c, 0, idx));
  return out;
}

// Cases PyTorch answers and kiln refuses on purpose, each with its reason (docs/golden-tests.md, "Special values").
std::optional<std::string> kept_refusal(const SpecialCase& c, std::string_view message) {
  if (c.op == "clamp" && message.find("without overflow") != std::string_view::npos)
    return "a clamp bound outside the integer dtype's range is an error in kiln (c10's checked conversion of a "
           "number); PyTorch's clamp kernel converts it unchecked and wraps it";
  return std::nullopt;
}

// assert_close's default tolerances (docs/golden-tests.md), signed zeros equal, NaN equal to NaN.
bool close_to_torch(double got, double want, DType dt) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  double rtol = 0, atol = 0;
  switch (dt) {
    case DType::F16: rtol = 1e-3; atol = 1e-5; break;
    case DType::BF16: rtol = 1.6e-2; atol = 1e-5; break;
    case DType::F32: rtol = 1.3e-6; atol = 1e-5; break;
    case DType::F64: rtol = 1e-7; atol = 1e-7; break;
    default: return got == want;
  }
  return std::abs(got - want) <= atol + rtol * std::abs(want);
}

// Compares eager's answers `eager` at grid elements `rows` with PyTorch's (vector or scalar path); failures are
// appended to `problems`.
void check_against_torch(const SpecialCase& c, const std::vector<int64_t>& rows, const Tensor& eager,
                         std::vector<std::string>& problems) {
  for (size_t k = 0; k < rows.size(); ++k) {
    const int64_t i = rows[k];
    const double got = element_value(eager, int64_t(k));
    const double vec = element_value(c.out, i);
    auto sc = c.scalar.find(i);
    const double scalar = sc == c.scalar.end() ? vec : element_value(sc->second, 0);
    if (close_to_torch(got, vec, c.out_dtype) || close_to_torch(got, scalar, c.out_dtype)) continue;
    problems.push_back(fmt::format("{}{}: eager {:.9g}, PyTorch {:.9g}{}", c.op, describe_inputs(c.columns, i), got, vec,
                                   sc == c.scalar.end() ? "" : fmt::format(" (scalar path {:.9g})", scalar)));
  }
}

void check_compiled_against_eager(const SpecialCase& c, const std::vector<Tensor>& in, const Tensor& eager,
                                  const Tensor& compiled, std::vector<std::string>& problems) {
  if (compiled.dtype() != eager.dtype() || compiled.numel() != eager.numel()) {
    problems.push_back(fmt::format("{}: compiled gives {} where eager gives {}", c.str(), compiled.str(), eager.str()));
    return;
  }
  const int ulps = ulp_bound(c.op);
  for (int64_t i = 0; i < eager.numel(); ++i) {
    const uint64_t e = element_bits(eager, i), k = element_bits(compiled, i);
    const double ve = element_value(eager, i), vk = element_value(compiled, i);
    if (agree(e, k, eager.dtype(), ulps, ve, vk, largest_input(in, i))) continue;
    problems.push_back(fmt::format("{}{}: compiled {:.9g} (bits {:x}), eager {:.9g} (bits {:x}){}", c.op,
                                   describe_inputs(in, i), vk, k, ve, e, ulps ? fmt::format(", beyond {} ulp", ulps) : ""));
  }
}

std::string first_problems(const std::vector<std::string>& problems, size_t n = 12) {
  std::string s;
  for (size_t i = 0; i < std::min(n, problems.size()); ++i) s += "\n  " + problems[i];
  if (problems.size() > n) s += fmt::format("\n  ... and {} more", problems.size() - n);
  return s;
}

// ---------------------------------------------------------------- the tests

TEST(SpecialValues, EveryPointwiseOpOfTheTableHasPyTorchAnswers) {
  std::set<std::string> answered, recorded;
  for (const SpecialCase& c : special_cases()) {
    recorded.insert(c.op);
    if (!c.error) answered.insert(c.op);
  }
  for (const std::string& op : pointwise_op_names())
    EXPECT_TRUE(answered.count(op)) << op << " is a pointwise op with no answers in tests/golden/special_values.json: "
                                    << "run tests/golden/gen_special_values.py (docs/golden-tests.md)";
  const std::vector<std::string> names = pointwise_op_names();
  for (const std::string& op : recorded)
    EXPECT_NE(std::find(names.begin(), names.end(), op), names.end()) << op << " in special_values.json is not a "
                                                                         "pointwise op of the table";
}

class SpecialValues : public ::testing::TestWithParam<std::string> {};

// Every case of the op: eager refuses what PyTorch refuses, answers what it answers (its vector or its scalar
// path, within assert_close's tolerances), and the compiled op gives eager's answers (bit for bit, or within
// the op's ulp bound).
TEST_P(SpecialValues, CompiledEqualsEagerAndEagerEqualsPyTorch) {
  const std::string& op = GetParam();
  int cases = 0;
  for (const SpecialCase& c : special_cases()) {
    if (c.op != op) continue;
    ++cases;
    SCOPED_TRACE(c.str());
    if (c.error) {
      EXPECT_THROW(run_eager(op, c.columns, c.attrs), Error) << "PyTorch refuses: " << *c.error;
      continue;
    }
    for (int64_t i : c.error_elements)
      EXPECT_THROW(run_eager(op, gather_rows(c.columns, {i}), c.attrs), Error)
          << "PyTorch refuses element " << describe_inputs(c.columns, i);
    const std::vector<int64_t> rows = answered_elements(c);
    const std::vector<Tensor> in = gather_rows(c.columns, rows);
    Tensor eager;
    try {
      eager = run_eager(op, in, c.attrs);
    } catch (const Error& e) {
      if (std::optional<std::string> why = kept_refusal(c, e.what())) {
        std::printf("[special values] kept divergence: %s: %s\n", c.str().c_str(), why->c_str());
        continue;
      }
      throw;
    }
    ASSERT_EQ(eager.dtype(), c.out_dtype) << "PyTorch's result dtype differs";
    std::vector<std::string> torch_problems, compiled_problems;
    check_against_torch(c, rows, eager, torch_problems);
    check_compiled_against_eager(c, in, eager, run_compiled(op, in, c.attrs), compiled_problems);
    EXPECT_TRUE(torch_problems.empty()) << "eager against PyTorch:" << first_problems(torch_problems);
    EXPECT_TRUE(compiled_problems.empty()) << "compiled against eager:" << first_problems(compiled_problems);
  }
  EXPECT_GT(cases, 0) << op << " has no cases in tests/golden/special_values.json";
}

// The same comparison on random arrangements of the special values: random lengths (off the vector width) and
// orders, so each value falls at every place of a vector loop and in its scalar remainder.
TEST_P(SpecialValues, CompiledEqualsEagerWhereverAnElementFalls) {
  const std::string& op = GetParam();
  std::vector<const SpecialCase*> cases;
  for (const SpecialCase& c : special_cases())
    if (c.op == op && !c.error && (c.dtype == "f32" || c.dtype == "f64" || c.dtype == "bf16" || c.dtype == "i32"))
      cases.push_back(&c);
  if (cases.empty()) GTEST_SKIP() << op << " answers no f32/f64/bf16/i32 case";
  check_property("SpecialValues/" + op, [&] {
    const SpecialCase& c = **rc::gen::elementOf(cases);
    const std::vector<int64_t> answered = answered_elements(c);
    const auto rows = *rc::gen::container<std::vector<int64_t>>(*rc::gen::inRange<size_t>(1, 100),
                                                                 rc::gen::elementOf(answered));
    const std::vector<Tensor> in = gather_rows(c.columns, rows);
    Tensor eager = run_eager(op, in, c.attrs);
    std::vector<std::string> problems;
    check_compiled_against_eager(c, in, eager, run_compiled(op, in, c.attrs), problems);
    if (!problems.empty()) RC_FAIL(c.str() + first_problems(problems));
  }, 4);
}

INSTANTIATE_TEST_SUITE_P(Ops, SpecialValues, ::testing::ValuesIn(pointwise_op_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// ---------------------------------------------------------------- reductions at scale

graph::Graph parse(const std::string& text) { return graph::parse_graph(text, "test.kir"); }
Tensor flat(const Tensor& t) { return reshape(contiguous(t), {-1}); }

// The graph's outputs, eager (the reference interpreter runs the eager kernels) and compiled.
std::pair<std::vector<Tensor>, std::vector<Tensor>> eager_and_compiled(const graph::Graph& g,
                                                                       const std::vector<Tensor>& inputs) {
  return {graph::run_graph(g, inputs), (*compile(g))(inputs)};
}

// How far an f32 sum may lie from the exact (fp64) sum of its elements: 1e-5 of sum |x| (partials of at most
// kSumBlock / 32 elements: 128 eps) plus the final rounding. Both backends promise it at every length.
constexpr double kF32SumBound = 1e-5;
void expect_sum_within_bound(const Tensor& got, double exact, double sum_abs, const std::string& what) {
  const double g = element_value(flat(got), 0);
  EXPECT_LE(std::abs(g - exact), kF32SumBound * sum_abs + 0x1p-23 * std::abs(exact))
      << what << ": " << g << ", exact " << exact << " (relative error " << (g - exact) / exact << ")";
}

// 1e9 elements of an expanded scalar (no memory): a single f32 accumulator per lane stops growing at 2^24
// times the value (the compiled sum was 13% off).
TEST(Reductions, SumOfABillionExpandedElementsIsAccurate) {
  const int64_t n = 1000000000;
  graph::Graph g = parse(fmt::format("graph s(%x: f32[1]) {{\n  %e = expand(%x, [{0}]) : f32[{0}]{{0}}\n"
                                     "  %s = sum(%e) : f32[]\n  %m = mean(%e) : f32[]\n  return %s, %m\n}}\n", n));
  const float v = 0.1f;
  Tensor x = Tensor::from_vector<float>({v}, {1});
  auto [eager, compiled] = eager_and_compiled(g, {x});
  expect_sum_within_bound(eager[0], double(v) * double(n), double(v) * double(n), "eager sum");
  expect_sum_within_bound(compiled[0], double(v) * double(n), double(v) * double(n), "compiled sum");
  expect_sum_within_bound(compiled[1], double(v), double(v), "compiled mean");
}

// 1.6e7 real values (64 MB) in [0, 1): the sum and the mean of a long row, both backends.
TEST(Reductions, LongSumsOfRealValuesAreAccurate) {
  const int64_t n = 16000003;  // off every vector width
  std::vector<float> xs(static_cast<size_t>(n));
  uint64_t state = 42;
  double exact = 0;
  for (float& x : xs) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    x = float(state >> 40) / float(1 << 24);
    exact += double(x);
  }
  graph::Graph g = parse(fmt::format("graph s(%x: f32[{0}]) {{\n  %s = sum(%x) : f32[]\n  %m = mean(%x) : f32[]\n"
                                     "  return %s, %m\n}}\n", n));
  auto [eager, compiled] = eager_and_compiled(g, {Tensor::from_vector<float>(xs, {n})});
  expect_sum_within_bound(eager[0], exact, exact, "eager sum");
  expect_sum_within_bound(compiled[0], exact, exact, "compiled sum");
  expect_sum_within_bound(compiled[1], exact / double(n), exact / double(n), "compiled mean");
}

// Row sums, column sums and full sums of random sizes (off the vector width and beyond the block length) and
// random values (mixed signs, an offset so that cancellation matters), against the fp64 sum of the same f32
// values, in both backends.
TEST(Reductions, SumsStayWithinTheBoundOfTheFp64Sum) {
  check_property("Reductions/SumsWithinBound", [] {
    const int64_t rows = *rc::gen::inRange<int64_t>(1, 5);
    const int64_t cols = *rc::gen::oneOf(rc::gen::inRange<int64_t>(1, 70), rc::gen::inRange<int64_t>(4000, 20000));
    const int dim = *rc::gen::inRange(0, 3);  // 0: columns, 1: rows, 2: everything
    const double offset = *rc::gen::element(0.0, 10.0, -1000.0);
    std::vector<float> xs(static_cast<size_t>(rows * cols));
    uint64_t state = *rc::gen::arbitrary<uint64_t>();
    for (float& x : xs) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      x = float(offset + double(int64_t(state >> 33) - (int64_t(1) << 30)) / double(1 << 30));
    }
    const std::string dims = dim == 2 ? "" : fmt::format(", [{}]", dim);
    const std::string out_shape = dim == 2 ? "" : std::to_string(dim == 0 ? cols : rows);
    graph::Graph g = parse(fmt::format("graph s(%x: f32[{}, {}]) {{\n  %s = sum(%x{}) : f32[{}]\n  return %s\n}}\n",
                                       rows, cols, dims, out_shape));
    auto [eager, compiled] = eager_and_compiled(g, {Tensor::from_vector<float>(xs, {rows, cols})});
    const int64_t outs = dim == 2 ? 1 : (dim == 0 ? cols : rows);
    for (int64_t o = 0; o < outs; ++o) {
      double exact = 0, sum_abs = 0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          if ((dim == 0 && c != o) || (dim == 1 && r != o)) continue;
          exact += double(xs[size_t(r * cols + c)]);
          sum_abs += std::abs(double(xs[size_t(r * cols + c)]));
        }
      for (const auto& [name, t] : {std::pair{"eager", eager[0]}, std::pair{"compiled", compiled[0]}}) {
        const double got = element_value(flat(t), o);
        if (std::abs(got - exact) > kF32SumBound * sum_abs + 0x1p-23 * std::abs(exact))
          RC_FAIL(fmt::format("{} sum {} of {}x{} over dim {}: {}, exact {}", name, o, rows, cols, dim, got, exact));
      }
    }
  }, 20);
}

// Rows of equal values have variance 0 and normalise to 0 (layer_norm, batch_norm), however large the values:
// the two-pass algorithm on data shifted by each row's first element (ops/common.h centre_over).
TEST(Reductions, RowsOfEqualLargeValuesHaveZeroVarianceInBothBackends) {
  for (double v : {1e4, 1e8, 3e37}) {
    for (int64_t width : {1000, 1001, 5000}) {
      SCOPED_TRACE(fmt::format("rows of {} x {}", width, v));
      graph::Graph g = parse(fmt::format(
          "graph n(%x: f32[3, {0}]) {{\n  %v = var(%x, [1]) : f32[3]\n  %s = std(%x, [1], correction=0) : f32[3]\n"
          "  %l = layer_norm(%x, [{0}]) : f32[3, {0}]\n  %b = batch_norm(%x, None, None, None, None, True, 0.1, 1e-05)"
          " : f32[3, {0}]\n  return %v, %s, %l, %b\n}}\n", width));
      Tensor x = full({3, width}, v, DType::F32);
      // every element equal: constant rows (var, std, layer_norm) and constant columns (batch_norm)
      auto [eager, compiled] = eager_and_compiled(g, {x});
      for (size_t k = 0; k < eager.size(); ++k) {
        for (const auto& [name, t] : {std::pair{"eager", eager[k]}, std::pair{"compiled", compiled[k]}}) {
          Tensor flat_t = flat(t);
          for (int64_t i = 0; i < flat_t.numel(); ++i)
            ASSERT_EQ(element_value(flat_t, i), 0.0) << name << " output " << k << " element " << i;
        }
      }
    }
  }
}

// amax/amin and maximum/minimum order -0 below +0 in both backends, whatever the order of the zeros (IEEE 754
// maximum/minimum); PyTorch's own answer depends on the order.
TEST(Reductions, SignedZerosOrderTheSameWayInBothBackends) {
  for (bool negative_first : {false, true}) {
    for (int64_t n : {2, 33}) {
      std::vector<float> xs(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) xs[size_t(i)] = ((i % 2 == 0) == negative_first) ? -0.0f : 0.0f;
      graph::Graph g = parse(fmt::format("graph z(%x: f32[{0}], %y: f32[{0}]) {{\n  %a = amax(%x, [0]) : f32[]\n"
                                         "  %b = amin(%x, [0]) : f32[]\n  %c = maximum(%x, %y) : f32[{0}]\n"
                                         "  %d = minimum(%x, %y) : f32[{0}]\n  return %a, %b, %c, %d\n}}\n", n));
      std::vector<float> ys(xs.size());
      std::transform(xs.begin(), xs.end(), ys.begin(), [](float f) { return -f; });  // every pair: +0 and -0
      auto [eager, compiled] = eager_and_compiled(g, {Tensor::from_vector<float>(xs, {n}), Tensor::from_vector<float>(ys, {n})});
      for (const auto& [name, out] : {std::pair{"eager", eager}, std::pair{"compiled", compiled}}) {
        EXPECT_FALSE(std::signbit(element_value(flat(out[0]), 0))) << name << " amax is +0";
        EXPECT_TRUE(std::signbit(element_value(flat(out[1]), 0))) << name << " amin is -0";
        for (int64_t i = 0; i < n; ++i) {
          EXPECT_FALSE(std::signbit(element_value(out[2], i))) << name << " maximum at " << i;
          EXPECT_TRUE(std::signbit(element_value(out[3], i))) << name << " minimum at " << i;
        }
      }
    }
  }
}

// rms_norm of rows holding inf: mean(x^2) is inf, rsqrt(inf) = 0, so the inf elements give NaN (inf * 0) and the
// others 0, as in PyTorch; the compiled rsqrt gave NaN for every element.
TEST(Reductions, RmsNormOfRowsHoldingInfMatchesEager) {
  graph::Graph g = parse("graph r(%x: f32[2, 40]) {\n  %y = rms_norm(%x, [40]) : f32[2, 40]\n"
                         "  %z = rsqrt(%x) : f32[2, 40]\n  return %y, %z\n}\n");
  std::vector<float> xs(80, 2.0f);
  xs[3] = INFINITY;
  xs[41] = 0.0f;
  xs[42] = -0.0f;
  xs[43] = INFINITY;
  xs[44] = -INFINITY;
  auto [eager, compiled] = eager_and_compiled(g, {Tensor::from_vector<float>(xs, {2, 40})});
  for (size_t k = 0; k < 2; ++k)
    for (int64_t i = 0; i < 80; ++i) {
      const double e = element_value(flat(eager[k]), i), c = element_value(flat(compiled[k]), i);
      EXPECT_TRUE((std::isnan(e) && std::isnan(c)) || (e == c && std::signbit(e) == std::signbit(c)))
          << "output " << k << " element " << i << " (x = " << xs[size_t(i)] << "): eager " << e << ", compiled " << c;
    }
  EXPECT_EQ(element_value(flat(eager[1]), 41), INFINITY);
  EXPECT_EQ(element_value(flat(eager[1]), 42), -INFINITY);
  EXPECT_EQ(element_value(flat(eager[1]), 43), 0.0);
  EXPECT_TRUE(std::isnan(element_value(flat(eager[0]), 3)));
  EXPECT_EQ(element_value(flat(eager[0]), 4), 0.0);
}

}  // namespace
}  // namespace kiln
