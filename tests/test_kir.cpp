// Tests of the .kir text format and the verifier: every example parses, verifies and round-trips; a RapidCheck
// property checks parse(print(g)) == g over random graphs; each class of malformed input gets an error naming
// its file:line:col and the problem.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include "eager/npy.h"
#include "graph/text.h"
#include "graph/verify.h"
#include "ops/api.h"

namespace kiln::graph {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------- graph comparison

bool same_elements(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  Tensor ca = contiguous(a), cb = contiguous(b);
  if (a.numel() == 0) return true;
  if (!is_floating(a.dtype()))
    return std::memcmp(ca.data_ptr(), cb.data_ptr(), size_t(ca.numel() * dtype_size(ca.dtype()))) == 0;
  std::vector<double> x = ca.to_double_vector(), y = cb.to_double_vector();
  for (size_t i = 0; i < x.size(); ++i) {
    bool both_nan = std::isnan(x[i]) && std::isnan(y[i]);
    if (!both_nan && (x[i] != y[i] || std::signbit(x[i]) != std::signbit(y[i]))) return false;
  }
  return true;
}

std::string value_diff(const Graph& a, ValueId ia, const Graph& b, ValueId ib) {
  const ValueInfo &va = a.value(ia), &vb = b.value(ib);
  if (va.name != vb.name) return "name " + va.name + " vs " + vb.name;
  if (!(va.meta == vb.meta)) return "meta of %" + va.name;
  if (va.requires_grad != vb.requires_grad) return "requires_grad of %" + va.name;
  if (va.wrapped_number != vb.wrapped_number) return "wrapped_number of %" + va.name;
  return "";
}

// Arguments are compared by the names of the values they read (value ids may differ between the graphs).
bool same_arg(const Graph& a, const Arg& x, const Graph& b, const Arg& y) {
  if (x.index() != y.index()) return false;
  if (auto* t = std::get_if<TensorArg>(&x)) return a.value(t->id).name == b.value(std::get<TensorArg>(y).id).name;
  if (auto* l = std::get_if<TensorListArg>(&x)) {
    const auto& m = std::get<TensorListArg>(y).ids;
    if (l->ids.size() != m.size()) return false;
    for (size_t i = 0; i < m.size(); ++i) {
      if ((l->ids[i] == kNoValue) != (m[i] == kNoValue)) return false;
      if (m[i] != kNoValue && a.value(l->ids[i]).name != b.value(m[i]).name) return false;
    }
    return true;
  }
  return x == y;
}

// The first difference between two graphs, or "" when they are the same graph.
std::string graph_diff(const Graph& a, const Graph& b) {
  if (a.name != b.name) return "graph name";
  if (a.inputs().size() != b.inputs().size()) return "number of inputs";
  for (size_t i = 0; i < a.inputs().size(); ++i)
    if (auto d = value_diff(a, a.inputs()[i], b, b.inputs()[i]); !d.empty()) return "input " + d;
  if (a.nodes().size() != b.nodes().size()) return "number of nodes";
  for (size_t i = 0; i < a.nodes().size(); ++i) {
    const Node &x = a.nodes()[i], &y = b.nodes()[i];
    std::string at = "node " + std::to_string(i) + ": ";
    if (x.kind != y.kind || x.op != y.op) return at + "kind or op";
    if (x.kind == NodeKind::Constant && !same_elements(x.constant, y.constant)) return at + "constant value";
    if (x.args.size() != y.args.size()) return at + "number of args";
    for (size_t k = 0; k < x.args.size(); ++k)
      if (!same_arg(a, x.args[k], b, y.args[k])) return at + "arg " + std::to_string(k);
    if (x.outputs.size() != y.outputs.size()) return at + "number of outputs";
    for (size_t k = 0; k < x.outputs.size(); ++k)
      if (auto d = value_diff(a, x.outputs[k], b, y.outputs[k]); !d.empty()) return at + d;
  }
  if (a.outputs().size() != b.outputs().size()) return "number of outputs";
  for (size_t i = 0; i < a.outputs().size(); ++i)
    if (a.value(a.outputs()[i]).name != b.value(b.outputs()[i]).name) return "output " + std::to_string(i);
  return "";
}

// parse(print(g)) reproduces g, prints the same, hashes the same, and verifies.
void expect_round_trip(const Graph& g, const PrintOptions& opts = {}, const std::string& file = "<rt>") {
  std::string text = print_graph(g, opts);
  Graph back = parse_graph(text, file);
  EXPECT_EQ(graph_diff(g, back), "") << text;
  EXPECT_EQ(print_graph(back, opts), text);
  EXPECT_EQ(back.structural_hash(), g.structural_hash()) << text;
  EXPECT_NO_THROW(verify_graph(back, file));
}

// ---------------------------------------------------------------- examples

TEST(KirExamples, EveryExampleParsesVerifiesAndRoundTrips) {
  fs::path dir = fs::path(KILN_SOURCE_DIR) / "examples";
  std::set<std::string> seen;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".kir") continue;
    SCOPED_TRACE(entry.path().string());
    seen.insert(entry.path().filename().string());
    Graph g = load_graph(entry.path().string());
    EXPECT_NO_THROW(verify_graph(g, entry.path().string()));
    EXPECT_GT(g.num_op_nodes(), 0);
    expect_round_trip(g);
  }
  for (const char* name : {"mlp.kir", "softmax.kir", "layernorm.kir", "attention.kir", "conv_block.kir",
                           "chain100.kir"})
    EXPECT_TRUE(seen.count(name)) << name << " is missing from examples/";
}

TEST(KirExamples, ExamplesHaveTheExpectedShapes) {
  fs::path dir = fs::path(KILN_SOURCE_DIR) / "examples";
  auto out_meta = [&](const char* file, size_t k) {
    Graph g = load_graph((dir / file).string());
    return g.value(g.outputs().at(k)).meta;
  };
  EXPECT_EQ(out_meta("mlp.kir", 0).sizes, Shape{});
  EXPECT_EQ(out_meta("attention.kir", 0).sizes, (Shape{2, 8, 16}));
  EXPECT_EQ(out_meta("conv_block.kir", 0).sizes, (Shape{2, 8, 8, 8}));
  Graph chain = load_graph((dir / "chain100.kir").string());
  EXPECT_EQ(chain.num_op_nodes(), 100);
}

// ---------------------------------------------------------------- printing and exact round trips

Tensor f32s(std::vector<float> v) { return Tensor::from_vector<float>(v, {int64_t(v.size())}); }

TEST(KirPrint, PrintsCanonicalForm) {
  Graph g = parse_graph(R"(graph g(%x: f32[2, 3], %w: f32[4, 3] grad) {
    %h = linear(%x, %w)
    %s = sum(%h, [1], keepdim=True, dtype=f64)
    %t = permute(%h, [1, 0])
    %a = add(%h, 2.5, alpha=2)
    %g = gelu(%h, approximate="tanh")
    return %s, %t, %a, %g })");
  EXPECT_EQ(print_graph(g), R"(graph g(%x: f32[2, 3], %w: f32[4, 3] grad) {
  %h = linear(%x, %w) : f32[2, 4]
  %s = sum(%h, [1], True, dtype=f64) : f64[2, 1]
  %t = permute(%h, [1, 0]) : f32[4, 2]{1, 4}
  %a = add(%h, 2.5, alpha=2) : f32[2, 4]
  %g = gelu(%h, approximate="tanh") : f32[2, 4]
  return %s, %t, %a, %g
}
)");
}

TEST(KirPrint, KeywordsAfterAnOmittedDefault) {
  Graph g = parse_graph("graph g(%x: f32[6]) { %s = slice(%x, end=4) %k = sum(%x, keepdim=True) return %s, %k }");
  std::string text = print_graph(g);
  EXPECT_NE(text.find("%s = slice(%x, end=4) : f32[4]"), std::string::npos) << text;
  EXPECT_NE(text.find("%k = sum(%x, keepdim=True) : f32[1]"), std::string::npos) << text;
}

TEST(KirRoundTrip, ConstantsKeepSpecialValuesBitForBit) {
  Graph g;
  g.name = "consts";
  double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  g.add_constant("f64", Tensor::from_vector<double>({0.1, -0.0, nan, inf, -inf, 5e-324, 1.7976931348623157e308}, {7}));
  g.add_constant("f32", f32s({0.1f, -0.0f, float(nan), float(inf), 1e-45f, 3.4028235e38f}));
  g.add_constant("f16", contiguous(to(f32s({0.1f, -0.0f, 65504.f, 6e-8f, float(-inf)}), DType::F16)));
  g.add_constant("bf16", contiguous(to(f32s({0.1f, -3.0e38f, float(nan)}), DType::BF16)));
  g.add_constant("i64", Tensor::from_vector<int64_t>({INT64_MIN, INT64_MAX, 0, -1}, {2, 2}));
  g.add_constant("u8", Tensor::from_vector<uint8_t>({0, 255}, {2}));
  g.add_constant("b", Tensor::from_vector<bool>({true, false}, {1, 2}));
  ValueId w = g.add_constant("w", Tensor::wrapped_number(Scalar(2.5)));
  ValueId wi = g.add_constant("wi", Tensor::wrapped_number(Scalar(int64_t(-3))));
  g.add_constant("empty", Tensor::empty({0, 3}, DType::F32));
  ValueId y = g.add_op1(OpId::add, {TensorArg{g.find_value("f32").value()}, TensorArg{w}, Scalar(int64_t(1))}, "y");
  g.set_outputs({y, wi});
  EXPECT_TRUE(g.value(w).wrapped_number);
  expect_round_trip(g);
  std::string text = print_graph(g);
  EXPECT_NE(text.find("%w = constant f64[] 2.5 wrapped"), std::string::npos) << text;
  EXPECT_NE(text.find("[0.1, -0.0, nan, inf, -inf, 5e-324, 1.7976931348623157e+308]"), std::string::npos) << text;
  EXPECT_NE(text.find("[-9223372036854775808, 9223372036854775807, 0, -1]"), std::string::npos) << text;
  EXPECT_NE(text.find("constant bool[1, 2] [True, False]"), std::string::npos) << text;
}

TEST(KirRoundTrip, NamesStringsListsAndMultipleResults) {
  Graph g;
  g.name = "odd name";
  ValueId x = g.add_input("x y", {DType::F32, {4, 6}, {}}, true);
  ValueId idx = g.add_constant("idx", Tensor::from_vector<int64_t>({0, 3, 1}, {3}));
  std::vector<ValueId> parts = g.add_op(OpId::split, {TensorArg{x}, Scalar(int64_t(4)), Scalar(int64_t(1))},
                                        {"a\"b", "tab\tc"});
  ValueId sel = g.add_op1(OpId::index, {TensorArg{x}, TensorListArg{{kNoValue, idx}}}, "h.1");
  ValueId cat = g.add_op1(OpId::cat, {TensorListArg{{parts[0], parts[1], sel}}, Scalar(int64_t(1))}, "ünï");
  ValueId d = g.add_op1(OpId::div, {TensorArg{cat}, Scalar(-0.0), std::string("floor")}, "");
  ValueId c = g.add_op1(OpId::to, {TensorArg{d}, DType::BF16}, "0");
  g.value(c).requires_grad = true;
  g.set_outputs({c, parts[1], x});
  expect_round_trip(g);
  std::string text = print_graph(g);
  EXPECT_NE(text.find("graph \"odd name\"(%\"x y\": f32[4, 6] grad)"), std::string::npos) << text;
  EXPECT_NE(text.find("%\"a\\\"b\", %\"tab\\tc\" = split(%\"x y\", 4, 1) : f32[4, 4]{6, 1}, f32[4, 2]{6, 1}"),
            std::string::npos) << text;
  EXPECT_NE(text.find("index(%\"x y\", [None, %idx])"), std::string::npos) << text;
  EXPECT_NE(text.find("div(%\"ünï\", -0.0, rounding_mode=\"floor\")"), std::string::npos) << text;
  EXPECT_NE(text.find("to(%v"), std::string::npos) << text;
  EXPECT_NE(text.find(": bf16[4, 9] grad"), std::string::npos) << text;
}

TEST(KirRoundTrip, ScalarKindsAreKept) {
  Graph g = parse_graph("graph g(%x: f32[3]) { %a = add(%x, 2, alpha=2.0) %b = add(%x, 2.0, alpha=True) "
                        "%c = clamp(%x, -inf, nan) %d = layer_norm(%x, [3], eps=1) return %a, %b, %c, %d }");
  const Node& a = g.nodes()[0];
  EXPECT_TRUE(std::get<Scalar>(a.args[1]).is_int());
  EXPECT_TRUE(std::get<Scalar>(a.args[2]).is_float());
  EXPECT_TRUE(std::get<Scalar>(g.nodes()[1].args[2]).is_bool());
  EXPECT_TRUE(std::get<Scalar>(g.nodes()[3].args[4]).is_int());
  expect_round_trip(g);
}

TEST(KirRoundTrip, NonContiguousInputsAndDevices) {
  Graph g;
  ValueId x = g.add_input("x", {DType::F64, {3, 2}, {1, 3}});
  ValueId y = g.add_op1(OpId::neg, {TensorArg{x}}, "y");
  g.set_outputs({y});
  expect_round_trip(g);
  EXPECT_NE(print_graph(g).find("%x: f64[3, 2]{1, 3}"), std::string::npos);
  Graph c = parse_graph("graph g(%x: f32[2]@cuda:1) { return %x }");
  EXPECT_EQ(c.value(0).meta.device, (Device{DeviceType::CUDA, 1}));
  expect_round_trip(c);
}

TEST(KirRoundTrip, LargeConstantsGoToContentHashedNpyFiles) {
  fs::path dir = fs::temp_directory_path() / ("kir_npy_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Graph g;
  g.name = "big";
  std::vector<float> vals(100);
  for (size_t i = 0; i < vals.size(); ++i) vals[i] = float(i) * 0.25f - 3.f;
  ValueId c = g.add_constant("w", Tensor::from_vector<float>(vals, {10, 10}));
  ValueId s = g.add_constant("small", f32s({1.f, 2.f}));
  g.set_outputs({c, s});
  PrintOptions opts;
  opts.inline_constant_limit = 8;
  opts.npy_dir = dir.string();
  fs::path kir = dir / "big.kir";
  save_graph(g, kir.string(), opts);
  std::string text = print_graph(g, opts);
  EXPECT_NE(text.find("%w = constant f32[10, 10] npy(\"big."), std::string::npos) << text;
  EXPECT_NE(text.find("%small = constant f32[2] [1.0, 2.0]"), std::string::npos) << text;
  Graph back = load_graph(kir.string());
  EXPECT_EQ(graph_diff(g, back), "");
  EXPECT_EQ(back.structural_hash(), g.structural_hash());
  // The file's name carries the hash, and the hash is checked on load.
  std::string npy_name = text.substr(text.find("npy(\"") + 5);
  npy_name = npy_name.substr(0, npy_name.find('"'));
  vals[7] = 1000.f;
  write_npy((dir / npy_name).string(), Tensor::from_vector<float>(vals, {10, 10}));
  try {
    load_graph(kir.string());
    ADD_FAILURE() << "a changed .npy was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("big.kir:2:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not the recorded"), std::string::npos) << e.what();
  }
  fs::remove(dir / npy_name);
  try {
    load_graph(kir.string());
    ADD_FAILURE() << "a missing .npy was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(KirRoundTrip, Sha256MatchesTheStandard) {
  // The recorded hash is SHA-256 of the elements' bytes: "abc" as three u8 elements is the FIPS 180-2 example.
  fs::path dir = fs::temp_directory_path() / ("kir_sha_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Graph g;
  g.add_constant("c", Tensor::from_vector<uint8_t>({'a', 'b', 'c'}, {3}));
  PrintOptions opts;
  opts.inline_constant_limit = 1;
  opts.npy_dir = dir.string();
  std::string text = print_graph(g, opts);
  EXPECT_NE(text.find("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), std::string::npos) << text;
  fs::remove_all(dir);
}

// ---------------------------------------------------------------- random graphs (RapidCheck)

Arg default_arg(const ArgSpec& spec) {
  const IValue& v = *spec.default_value;
  if (v.is_scalar()) return v.scalar();
  if (v.is_int_list()) return v.int_list();
  if (v.is_dtype()) return v.dtype();
  if (v.is_string()) return v.string();
  return std::monostate{};
}

// Positional arguments, then keywords, then the schema's defaults.
std::vector<Arg> full_args(OpId op, std::vector<Arg> positional, const std::map<std::string, Arg>& kw = {}) {
  const Schema& s = op_info(op).schema;
  for (size_t i = positional.size(); i < s.args.size(); ++i) {
    auto it = kw.find(s.args[i].name);
    positional.push_back(it != kw.end() ? it->second : default_arg(s.args[i]));
  }
  return positional;
}

class RandomGraph {
 public:
  Graph g;

  void build() {
    g.name = *rc::gen::elementOf(std::vector<std::string>{"g", "my graph", "m.1", "_x"});
    int inputs = *rc::gen::inRange(1, 4);
    for (int i = 0; i < inputs; ++i) add_input();
    int steps = *rc::gen::inRange(0, 30);
    for (int i = 0; i < steps; ++i) step();
    std::vector<ValueId> outs;
    for (ValueId id = 0; id < g.num_values(); ++id)
      if (*rc::gen::inRange(0, 3) == 0) outs.push_back(id);
    g.set_outputs(outs);
  }

 private:
  std::vector<ValueId> floats_;  // floating values usable as operands
  int counter_ = 0;

  std::string name() {
    std::string stem =
        *rc::gen::elementOf(std::vector<std::string>{"x", "h.1", "a b", "q\"t", "tab\t", "ünï", "0", "_", "v"});
    return stem + "_" + std::to_string(counter_++);
  }
  Shape shape() {
    Shape s(size_t(*rc::gen::inRange(0, 4)));
    for (int64_t& d : s) d = *rc::gen::inRange(0, 5);
    return s;
  }
  DType float_dtype() { return *rc::gen::element(DType::F32, DType::F64, DType::F16, DType::BF16); }
  ValueId pick() { return floats_[size_t(*rc::gen::inRange<size_t>(0, floats_.size()))]; }

  void add_input() {
    TensorMeta m{float_dtype(), shape(), {}};
    if (m.sizes.size() == 2 && *rc::gen::arbitrary<bool>()) m.strides = {1, std::max<int64_t>(m.sizes[0], 1)};
    floats_.push_back(g.add_input(name(), m, *rc::gen::arbitrary<bool>()));
  }

  double special() {
    double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    return *rc::gen::oneOf(rc::gen::element(0.0, -0.0, nan, inf, -inf, 0.1, -2.5, 1e-300, 6e4),
                           rc::gen::arbitrary<double>());
  }

  void add_constant() {
    DType dt = DType(*rc::gen::inRange(0, kNumDTypes));
    Tensor t = Tensor::empty(shape(), dt);
    KILN_DISPATCH_ALL(dt, [&](auto tag) {
      using T = decltype(tag);
      T* p = t.data<T>();
      for (int64_t i = 0; i < t.numel(); ++i) {
        if constexpr (std::is_same_v<T, bool>) p[i] = *rc::gen::arbitrary<bool>();
        else if constexpr (std::is_integral_v<T>) p[i] = *rc::gen::arbitrary<T>();
        else p[i] = T(special());
      }
    });
    ValueId id = g.add_constant(name(), t);
    if (is_floating(dt)) floats_.push_back(id);
  }

  void add_wrapped() {
    Scalar s = *rc::gen::oneOf(rc::gen::map(rc::gen::arbitrary<int64_t>(), [](int64_t v) { return Scalar(v); }),
                               rc::gen::map(rc::gen::arbitrary<bool>(), [](bool v) { return Scalar(v); }),
                               rc::gen::just(Scalar(special())));
    ValueId id = g.add_constant(name(), Tensor::wrapped_number(s));
    if (s.is_float()) floats_.push_back(id);
  }

  // Adds an op node unless shape inference rejects this combination.
  void op(OpId id, std::vector<Arg> positional, const std::map<std::string, Arg>& kw = {}) {
    std::vector<std::string> names;
    for (int i = 0; i < 8; ++i) names.push_back(name());
    try {
      std::vector<ValueId> outs = g.add_op(id, full_args(id, std::move(positional), kw), names);
      for (ValueId o : outs) {
        if (is_floating(g.value(o).meta.dtype)) floats_.push_back(o);
        if (*rc::gen::inRange(0, 8) == 0) g.value(o).requires_grad = true;
      }
    } catch (const Error&) {
    }
  }

  Arg number() {
    return *rc::gen::oneOf(rc::gen::map(rc::gen::inRange<int64_t>(-3, 4), [](int64_t v) { return Arg(Scalar(v)); }),
                           rc::gen::just(Arg(Scalar(special()))));
  }

  void step() {
    int kind = *rc::gen::inRange(0, 11);
    if (kind == 0) return add_constant();
    if (kind == 1) return add_wrapped();
    ValueId x = pick();
    const Shape sizes = g.value(x).meta.sizes;
    int64_t rank = int64_t(sizes.size());
    int64_t dim = rank ? *rc::gen::inRange<int64_t>(-rank, rank) : 0;
    switch (kind) {
      case 2: {
        OpId u = *rc::gen::element(OpId::exp, OpId::neg, OpId::sin, OpId::abs, OpId::relu, OpId::sigmoid, OpId::tanh);
        return op(u, {TensorArg{x}});
      }
      case 3: return op(OpId::gelu, {TensorArg{x}}, {{"approximate", std::string("tanh")}});
      case 4: {
        OpId b = *rc::gen::element(OpId::add, OpId::sub, OpId::mul, OpId::div, OpId::maximum);
        Arg other = *rc::gen::arbitrary<bool>() ? Arg(TensorArg{pick()}) : number();
        std::map<std::string, Arg> kw;
        if ((b == OpId::add || b == OpId::sub) && *rc::gen::arbitrary<bool>()) kw["alpha"] = number();
        if (b == OpId::div && *rc::gen::arbitrary<bool>()) kw["rounding_mode"] = std::string("floor");
        return op(b, {TensorArg{x}, other}, kw);
      }
      case 5: {
        OpId r = *rc::gen::element(OpId::sum, OpId::mean, OpId::amax);
        std::map<std::string, Arg> kw;
        if (r != OpId::amax && *rc::gen::arbitrary<bool>()) kw["dtype"] = DType::F64;
        return op(r, {TensorArg{x}, IntList{dim}, Scalar(*rc::gen::arbitrary<bool>())}, kw);
      }
      case 6: {
        IntList perm(sizes.size());
        for (size_t i = 0; i < perm.size(); ++i) perm[i] = int64_t(i);
        for (size_t i = 1; i < perm.size(); ++i) std::swap(perm[i], perm[*rc::gen::inRange<size_t>(0, i + 1)]);
        return op(OpId::permute, {TensorArg{x}, perm});
      }
      case 7: return op(OpId::unsqueeze, {TensorArg{x}, Scalar(int64_t(*rc::gen::inRange<int64_t>(0, rank + 1)))});
      case 8: return op(OpId::split, {TensorArg{x}, Scalar(int64_t(*rc::gen::inRange(1, 3))), Scalar(dim)});
      case 9: return op(OpId::cat, {TensorListArg{{x, x}}, Scalar(dim)});
      default: {
        if (rank == 0 || sizes[0] == 0) return op(OpId::to, {TensorArg{x}, float_dtype()});
        ValueId idx = g.add_constant(name(), Tensor::from_vector<int64_t>({sizes[0] - 1, 0}, {2}));
        std::vector<ValueId> ids = {idx};
        if (rank > 1 && *rc::gen::arbitrary<bool>()) ids = {kNoValue, idx};
        if (ids.size() == 2 && sizes[1] == 0) ids = {idx};
        return op(OpId::index, {TensorArg{x}, TensorListArg{ids}});
      }
    }
  }
};

RC_GTEST_PROP(KirProperty, ParsePrintIsIdentity, ()) {
  RandomGraph r;
  r.build();
  std::string text = print_graph(r.g);
  Graph back = parse_graph(text, "<random>");
  RC_ASSERT(graph_diff(r.g, back) == "");
  RC_ASSERT(print_graph(back) == text);
  RC_ASSERT(back.structural_hash() == r.g.structural_hash());
  verify_graph(back, "<random>");
}

// ---------------------------------------------------------------- malformed input: one test per class

std::string parse_error(const std::string& text) {
  try {
    parse_graph(text, "t.kir");
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "parsed without an error:\n" << text;
  return "";
}

// The error starts with "t.kir:<loc>: " and mentions `problem`.
void expect_error(const std::string& text, const std::string& loc, const std::string& problem) {
  std::string msg = parse_error(text);
  EXPECT_EQ(msg.rfind("t.kir:" + loc + ": ", 0), 0u) << "wrong location in: " << msg;
  EXPECT_NE(msg.find(problem), std::string::npos) << "'" << problem << "' not in: " << msg;
}

const std::string kHead = "graph g(%x: f32[2, 3], %w: f32[4, 3]) {\n";  // line 1; statements start on line 2

TEST(KirErrors, TruncatedFile) {
  expect_error(kHead + "  %y = exp(%x) : f32[2, 3]\n", "3:1", "the file ends too early");
  expect_error(kHead + "  %y = exp(", "2:12", "the file ends too early");
  expect_error("", "1:1", "expected 'graph'");
  expect_error("graph g(%x: f32[2", "1:18", "the file ends too early");
}

TEST(KirErrors, WrongToken) {
  expect_error("graph g(%x f32[2]) {\n  return %x\n}", "1:12", "expected ':'");
  expect_error(kHead + "  %y = exp(%x) ; \n return %y }", "2:16", "expected");
  expect_error(kHead + "  %y = %x\n  return %y\n}", "2:8", "expected an op name or 'constant'");
  expect_error(kHead + "  return %x\n} extra", "3:3", "exactly one graph");
  expect_error(kHead + "  %y = exp(%x) $\n", "2:16", "unexpected character '$'");
}

TEST(KirErrors, UnknownOpSuggestsTheClosestName) {
  expect_error(kHead + "  %y = lienar(%x, %w)\n  return %y\n}", "2:8", "unknown op 'lienar' (did you mean 'linear'?)");
  expect_error(kHead + "  %y = frobnicate(%x)\n  return %y\n}", "2:8", "`kiln ops` lists the ops");
}

TEST(KirErrors, UnknownDtype) {
  expect_error("graph g(%x: f31[2]) {\n  return %x\n}", "1:13", "unknown dtype 'f31' (did you mean 'f32'?)");
  expect_error(kHead + "  %y = to(%x, float99)\n  return %y\n}", "2:15", "unknown word 'float99'");
}

TEST(KirErrors, DuplicateName) {
  expect_error(kHead + "  %y = exp(%x)\n  %y = neg(%x)\n  return %y\n}", "3:3", "%y is already defined at line 2:3");
  expect_error("graph g(%x: f32[2], %x: f32[2]) {\n  return %x\n}", "1:21", "already defined");
  expect_error(kHead + "  %a, %a = split(%x, 1)\n  return %a\n}", "2:7", "named twice");
}

TEST(KirErrors, UseBeforeDefinitionAndCycles) {
  expect_error(kHead + "  %y = exp(%z)\n  return %y\n}", "2:12", "%z is used before it is defined");
  expect_error(kHead + "  %a = exp(%b)\n  %b = exp(%a)\n  return %b\n}", "2:12", "rules out cycles");
  expect_error(kHead + "  %y = exp(%x)\n  return %yy\n}", "3:10", "(did you mean %y?)");
}

TEST(KirErrors, WrongArityAndArgumentTypes) {
  expect_error(kHead + "  %y = exp(%x, %x)\n  return %y\n}", "2:16", "exp() takes 1 positional arguments");
  expect_error(kHead + "  %y = add(%x, %x, 2)\n  return %y\n}", "2:20", "pass 'alpha' as alpha=");
  expect_error(kHead + "  %y = linear(%x)\n  return %y\n}", "2:8", "missing required argument 'weight'");
  expect_error(kHead + "  %y = sum(%x, dim=\"a\")\n  return %y\n}", "2:8", "argument 'dim' must be");
  expect_error(kHead + "  %y = sum(%x, keep_dim=True)\n  return %y\n}", "2:16", "(did you mean 'keepdim'?)");
  expect_error(kHead + "  %y = sum(%x, keepdim=True, keepdim=False)\n  return %y\n}", "2:30", "given twice");
  expect_error(kHead + "  %y = sum(%x, keepdim=True, [0])\n  return %y\n}", "2:30", "positional argument after keyword");
  expect_error(kHead + "  %y = cat([%x, 1])\n  return %y\n}", "2:17", "list of tensors");
  expect_error(kHead + "  %y = permute(%x, [1, 0.5])\n  return %y\n}", "2:24", "integers only");
}

TEST(KirErrors, ShapeInferenceFailuresCarryTheLocation) {
  expect_error(kHead + "  %y = add(%x, %w)\n  return %y\n}", "2:8", "add");
  expect_error(kHead + "  %y = mm(%x, %w)\n  return %y\n}", "2:8", "mm");
}

TEST(KirErrors, WrittenMetaDisagreesWithInference) {
  expect_error(kHead + "  %y = exp(%x) : f32[3, 2]\n  return %y\n}", "2:18",
               "%y is written as f32[3, 2] but exp(...) gives f32[2, 3]");
  expect_error(kHead + "  %y = permute(%x, [1, 0]) : f32[3, 2]\n  return %y\n}", "2:30", "gives f32[3, 2]{1, 3}");
  expect_error(kHead + "  %y = exp(%x) : f32[2, 3], f32[2, 3]\n  return %y\n}", "2:16", "2 types written for 1 results");
  expect_error(kHead + "  %a = split(%x, 1)\n  return %a\n}", "2:3", "produces 2 results here but 1 name is given");
}

TEST(KirErrors, AbsurdSizes) {
  expect_error("graph g(%x: f32[-1]) {\n  return %x\n}", "1:17", "negative size");
  expect_error("graph g(%x: f32[1099511627777]) {\n  return %x\n}", "1:17", "absurdly large");
  expect_error("graph g(%x: f32[1048576, 1048576, 2]) {\n  return %x\n}", "1:16", "more than 2^40 elements");
  expect_error("graph g(%x: f32[2]{1, 1}) {\n  return %x\n}", "1:19", "2 strides for 1 dimensions");
  expect_error(kHead + "  %y = expand(%x, [1099511627776, 2, 3])\n  return %y\n}", "2:8", "more than 2^40");
  expect_error(kHead + "  %y = view(%x, [1099511627777])\n  return %y\n}", "2:18", "absurdly large");
  std::string many = "graph g(%x: f32[" + std::string(200, '1') + "]) {}";
  expect_error(many, "1:17", "does not fit in 64 bits");
}

TEST(KirErrors, HugeNumbers) {
  expect_error(kHead + "  %y = add(%x, 99999999999999999999)\n  return %y\n}", "2:16", "does not fit in 64 bits");
  expect_error(kHead + "  %y = add(%x, 1e999)\n  return %y\n}", "2:16", "out of range");
  expect_error(kHead + "  %c = constant f32[] 1e39\n  return %c\n}", "2:23", "out of range for f32");
  expect_error(kHead + "  %c = constant f16[] 70000.0\n  return %c\n}", "2:23", "out of range for f16");
  expect_error(kHead + "  %c = constant u8[2] [1, 256]\n  return %c\n}", "2:27", "does not fit in u8");
  expect_error(kHead + "  %y = add(%x, 1e)\n  return %y\n}", "2:16", "the exponent needs digits");
  expect_error(kHead + "  %y = add(%x, 12abc)\n  return %y\n}", "2:16", "malformed number");
}

TEST(KirErrors, BadStrings) {
  expect_error(kHead + "  %y = gelu(%x, approximate=\"ta\\qnh\")\n  return %y\n}", "2:32", "bad escape '\\q'");
  expect_error(kHead + "  %y = gelu(%x, approximate=\"tanh\n\")\n  return %y\n}", "2:29", "unterminated string");
  expect_error(kHead + "  %y = gelu(%x, approximate=\"\\x4\")\n  return %y\n}", "2:30", "two hex digits");
  expect_error(kHead + "  %\"y = exp(%x)\n", "2:3", "unterminated string");
  expect_error(kHead + "  % = exp(%x)\n", "2:3", "expected a value name after '%'");
}

TEST(KirErrors, DeepNesting) {
  expect_error(kHead + "  %y = permute(%x, [[[[[[[[1]]]]]]]])\n  return %y\n}", "2:21", "lists do not nest");
  expect_error(kHead + "  %y = exp(((((%x)))))\n  return %y\n}", "2:12", "expected an argument");
}

TEST(KirErrors, MalformedConstants) {
  expect_error(kHead + "  %c = constant f32[3] [1.0, 2.0]\n  return %c\n}", "2:24", "2 elements given but the type f32[3] holds 3");
  expect_error(kHead + "  %c = constant f32[1] [1.0, 2.0]\n  return %c\n}", "2:30", "more elements than");
  expect_error(kHead + "  %c = constant i64[1] [1.5]\n  return %c\n}", "2:25", "i64 constants hold integers");
  expect_error(kHead + "  %c = constant bool[1] [1]\n  return %c\n}", "2:26", "True or False");
  expect_error(kHead + "  %c = constant f32[2] [1.0, 2.0] wrapped\n  return %c\n}", "2:35", "only 0-dim constants");
  expect_error(kHead + "  %c = constant f32[2] 1.0\n  return %c\n}", "2:24", "as a list");
  expect_error(kHead + "  %c = constant f32[2, 2]{1, 2} [1.0, 2.0, 3.0, 4.0]\n  return %c\n}", "2:17", "stored contiguous");
  expect_error(kHead + "  %c = constant f32[2] npy(\"nope.npy\") sha256=\"00\"\n  return %c\n}", "2:28", "does not exist");
}

// Absurd numbers in arguments reach shape inference; sizes that overflow int64 are errors at the op, not UB.
TEST(KirErrors, SizeOverflowInShapeInference) {
  auto stmt = [](const std::string& s) { return kHead + "  " + s + "\n  return %y\n}"; };
  expect_error(stmt("%y = arange(0, 9223372036854775807)"), "2:8", "more than 2^40 elements");
  expect_error(stmt("%y = arange(-9223372036854775808, 9223372036854775807)"), "2:8",
               "arange: the result would have more than 2^63 elements");
  expect_error(stmt("%y = arange(0.0, 1e308, 1e-308)"), "2:8", "arange: the result would have more than 2^63 elements");
  expect_error(stmt("%y = eye(9223372036854775807)"), "2:8", "eye: the result would have more than 2^63 elements");
  expect_error(stmt("%y = full([2], 1e308, dtype=i64)"), "2:8", "full: value 1e+308 cannot be converted to type i64");
  expect_error(stmt("%y = repeat(%x, [1099511627776, 1099511627776])"), "2:8",
               "repeat: the result would have more than 2^63 elements");
  expect_error(stmt("%y = slice(%x, 0, -9223372036854775808, 9223372036854775807, 9223372036854775807)"), "2:8",
               "slice: the stride of the result");
  expect_error(stmt("%y = as_strided(%x, [2], [1], 9223372036854775807)"), "2:8", "as_strided: the last element's");
  expect_error(stmt("%y = narrow(%x, 0, 1, 9223372036854775807)"), "2:8", "narrow: start 1 + length");
  expect_error("graph g(%x: f32[1, 1, 4, 4]) {\n  %y = max_pool2d(%x, [1099511627776], dilation=[1099511627776])\n"
               "  return %y\n}", "2:8", "max_pool2d: the dilated kernel size");
  // Extreme but meaningful arguments parse (chunk's (n + chunks - 1) / chunks used to overflow).
  Graph g = parse_graph(kHead + "  %a, %b = chunk(%x, 9223372036854775807) : f32[1, 3], f32[1, 3]\n"
                                "  %s = slice(%x, 1, -9223372036854775808, 9223372036854775807, 2) : f32[2, 2]{3, 2}\n"
                                "  return %a, %b, %s\n}", "t.kir");
  EXPECT_EQ(g.num_op_nodes(), 2);
}

TEST(KirVerify, ReportsTheFirstStaleMetaWithItsLocation) {
  Graph g = parse_graph(kHead + "  %h = linear(%x, %w)\n  %r = relu(%h)\n  return %r\n}", "m.kir");
  EXPECT_NO_THROW(verify_graph(g, "m.kir"));
  g.value(g.find_value("h").value()).meta = {DType::F32, {2, 5}, {5, 1}};
  try {
    verify_graph(g, "m.kir");
    ADD_FAILURE() << "stale meta not reported";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("m.kir:2:3: node 0 (%h = linear(%x, %w)): expected f32[2, 4] but the "
                                         "graph says f32[2, 5] for %h", 0), 0u) << e.what();
  }
}

TEST(KirVerify, ReportsUseBeforeDefinitionAfterSurgery) {
  Graph g = parse_graph(kHead + "  %a = exp(%x)\n  %b = neg(%a)\n  return %b\n}", "m.kir");
  std::swap(g.nodes()[0], g.nodes()[1]);
  try {
    verify_graph(g, "m.kir");
    ADD_FAILURE() << "use before definition not reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m.kir:3:3: node 0 (%b = neg(%a)): reads %a before it is defined"),
              std::string::npos) << e.what();
  }
}

TEST(KirVerify, ReportsBadArgumentsAndOutputs) {
  Graph g;
  ValueId x = g.add_input("x", {DType::F32, {2}, {}});
  ValueId y = g.add_op1(OpId::exp, {TensorArg{x}}, "y");
  g.nodes()[0].args.push_back(Scalar(int64_t(1)));
  EXPECT_THROW(verify_graph(g, "mem"), Error);
  g.nodes()[0].args.pop_back();
  g.set_outputs({y, 7});
  try {
    verify_graph(g, "mem");
    ADD_FAILURE() << "undefined output not reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mem: graph output %<undefined value #7>"), std::string::npos) << e.what();
  }
}

TEST(KirFiles, LoadReportsMissingFiles) {
  try {
    load_graph("/nonexistent/dir/x.kir");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/x.kir: cannot open the file"), std::string::npos);
  }
}

}  // namespace
}  // namespace kiln::graph
