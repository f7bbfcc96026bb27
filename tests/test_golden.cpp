// Golden tests: runs every case of tests/golden/manifest.json (inputs, outputs and gradients recorded from
// PyTorch 2.11 by tests/golden/gen_goldens.py) through kiln's dispatcher and autograd, and compares with
// torch.testing.assert_close's default tolerances. One test per op; each case runs twice, once on
// contiguous inputs and once on strided (non-contiguous) copies. See docs/golden-tests.md.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>

#include "eager/npy.h"
#include "autograd/autograd.h"
#include "eager/loops.h"
#include "ops/dispatch.h"

using namespace kiln;
using json = nlohmann::json;

namespace {

const std::string kGoldenDir = std::string(KILN_SOURCE_DIR) + "/tests/golden";

// Cases where kiln deliberately differs from PyTorch, by case id ("op.N", as in manifest.json). Each entry
// says why; docs/golden-tests.md lists the same entries. Nothing else is skipped.
constexpr const char* kF64ScalarOperandGrad =
    "the gradient of a 0-dim f64 operand of an f32 op is computed in f32 (the result dtype) and reduced over the "
    "broadcast; kiln's f32 sum accumulates in f64, PyTorch's in f32, so they differ at f32 precision (about 1.5e-7 "
    "relative) while the f64 tolerance is 1e-7";

constexpr const char* kRoundIntegers =
    "kiln has one round row for aten's round and round.decimals; on an integer tensor with decimals=0 it returns a "
    "copy, like torch.round(x); the generator called round.decimals, which refuses integer tensors";

constexpr const char* kGeluAtInfinity =
    "kiln's gelu is its formula for every dtype, gelu(inf) = inf, as PyTorch's f64 kernel and its scalar path; these "
    "edge values ran through PyTorch's vectorised f32 kernel, which gives NaN at +inf (tests/golden/special_values.json "
    "records both paths)";
constexpr const char* kExactRemainder =
    "kiln's remainder uses the exact fmod, as PyTorch's scalar path; these edge values ran through PyTorch's vectorised "
    "Sleef fmod, which gives NaN where |a / b| overflows (1e30 % 1e-30)";

const std::map<std::string, std::string>& kept_divergences() {
  // Each entry: a case id and why kiln keeps its own behaviour there. docs/golden-tests.md lists them too.
  static const std::map<std::string, std::string> m = {
      {"gelu.4", kGeluAtInfinity},
      {"gelu.6", kGeluAtInfinity},
      {"remainder.18", kExactRemainder},
      {"round.9", kRoundIntegers},
      {"round.10", kRoundIntegers},
      {"round.11", kRoundIntegers},
      {"div.9", kF64ScalarOperandGrad},
      {"pow.9", kF64ScalarOperandGrad},
      {"log_softmax.6", "kiln computes f16 log_softmax in f32 and rounds once; PyTorch's CPU kernel rounds an "
                        "intermediate to f16, which moves one element by 4 f16 ulps"},
  };
  return m;
}

// One rule instead of a list of ids: kiln accepts a number in every Tensor argument (it becomes a wrapped-number
// tensor, as PyTorch's .Scalar overloads and Python's `torch.eq(x, 2.5)` do), where the generator called the
// .Tensor overload, which refuses numbers.
constexpr std::string_view kNumberForTensorRule =
    "kiln accepts a number in every Tensor argument (a wrapped number, like PyTorch's .Scalar overloads); the "
    "generator called the aten .Tensor overload, which refuses it";
std::optional<std::string> kept_divergence(const json& c) {
  auto it = kept_divergences().find(c["id"].get<std::string>());
  if (it != kept_divergences().end()) return it->second;
  if (c.contains("error") && c["error"].get<std::string>().find("Expected a value of type 'Tensor' for argument") !=
                                 std::string::npos)
    return std::string(kNumberForTensorRule);
  return std::nullopt;
}

// Ops whose meaning depends on the input's memory layout: their strided run would test something else.
const std::set<std::string> kLayoutDependentOps = {"view", "as_strided"};

// torch.testing.assert_close defaults (rtol, atol) per dtype; integers and bool compare exactly.
struct Tolerance {
  double rtol = 0, atol = 0;
};
Tolerance tolerance_for(DType dt) {
  switch (dt) {
    case DType::F16: return {1e-3, 1e-5};
    case DType::BF16: return {1.6e-2, 1e-5};
    case DType::F32: return {1.3e-6, 1e-5};
    case DType::F64: return {1e-7, 1e-7};
    default: return {0, 0};
  }
}

const json& manifest() {
  static const json m = [] {
    std::ifstream in(kGoldenDir + "/manifest.json");
    if (!in) return json();
    return json::parse(in);
  }();
  return m;
}

// Reads a golden tensor; bf16 tensors are stored as f32 (exact) and converted back here.
Tensor load_tensor(const std::string& file, DType dtype) {
  Tensor stored = read_npy(kGoldenDir + "/data/" + file);
  if (stored.dtype() == dtype) return stored;
  KILN_CHECK(dtype == DType::BF16 && stored.dtype() == DType::F32, "golden file {} holds {} but the manifest says {}",
             file, dtype_name(stored.dtype()), dtype_name(dtype));
  Tensor t = Tensor::empty(stored.sizes(), dtype);
  copy_into(t, stored);
  return t;
}

DType dtype_named(const std::string& name) {
  std::optional<DType> dt = dtype_from_name(name);
  KILN_CHECK(dt.has_value(), "golden manifest: unknown dtype '{}'", name);
  return *dt;
}

// The same values in a non-contiguous layout (every element one slot apart), so kernels see real strides.
Tensor strided_copy(const Tensor& t) {
  Shape strides = contiguous_strides(t.sizes());
  for (int64_t& s : strides) s *= 2;
  Tensor out = Tensor::empty_strided(t.sizes(), strides, t.dtype());
  copy_into(out, t);
  return out;
}

double number_of(const json& v) {
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s == "nan") return NAN;
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
    fail("golden manifest: bad float '{}'", s);
  }
  return v.get<double>();
}

// One built call: the arguments, and the tensors autograd differentiates with respect to.
struct BuiltCall {
  std::vector<IValue> positional;
  std::map<std::string, IValue> kwargs;
  std::map<int, Tensor> leaves;  // flat input index -> leaf
};

class CallBuilder {
 public:
  CallBuilder(const OpInfo& op, const json& c, bool strided) : op_(op), case_(c), strided_(strided) {
    if (c.contains("grads"))
      for (const auto& [k, file] : c["grads"].items()) grad_indices_.insert(std::stoi(k));
  }

  BuiltCall build() {
    // Flat indices count every Tensor/Tensor[] schema argument in schema order, given or not.
    std::map<std::string, const json*> given;
    const json& args = case_["args"];
    for (size_t i = 0; i < args.size(); ++i) given[op_.schema.args.at(i).name] = &args[i];
    for (const auto& [name, v] : case_["kwargs"].items()) given[name] = &v;
    std::vector<std::pair<std::string, IValue>> values;
    for (const ArgSpec& a : op_.schema.args) {
      auto it = given.find(a.name);
      if (it == given.end()) {
        if (a.type == ArgType::Tensor) ++flat_;
        continue;
      }
      values.emplace_back(a.name, value(*it->second, a));
    }
    BuiltCall call;
    size_t positional = args.size();
    for (size_t i = 0; i < values.size(); ++i) {
      if (i < positional) call.positional.push_back(values[i].second);
      else call.kwargs[values[i].first] = values[i].second;
    }
    call.leaves = leaves_;
    return call;
  }

 private:
  IValue value(const json& v, const ArgSpec& a) {
    if (a.type == ArgType::Tensor) return tensor_slot(v, a);
    if (v.contains("tensor_list")) {
      TensorList list;
      for (const json& e : v["tensor_list"]) {
        IValue t = tensor_slot(e, a);
        list.push_back(t.is_none() ? Tensor() : t.tensor());
      }
      return IValue(std::move(list));
    }
    return plain(v);
  }

  static IValue plain(const json& v) {
    if (v.contains("int")) return IValue(v["int"].get<int64_t>());
    if (v.contains("float")) return IValue(number_of(v["float"]));
    if (v.contains("bool")) return IValue(v["bool"].get<bool>());
    if (v.contains("ints")) return IValue(v["ints"].get<IntList>());
    if (v.contains("dtype")) return IValue(dtype_named(v["dtype"].get<std::string>()));
    if (v.contains("str")) return IValue(v["str"].get<std::string>());
    if (v.contains("none")) return IValue();
    fail("golden manifest: cannot read argument {}", v.dump());
  }

  // One flat tensor input: a tensor file, a number (a wrapped number once bound) or None.
  IValue tensor_slot(const json& v, const ArgSpec& a) {
    int index = flat_++;
    if (!v.contains("tensor")) return plain(v);
    Tensor t = load_tensor(v["tensor"].get<std::string>(), dtype_named(v["dtype"].get<std::string>()));
    if (strided_) t = strided_copy(t);
    if (grad_indices_.count(index)) {
      t.set_requires_grad(true);
      leaves_[index] = t;
      // A leaf that requires grad cannot be written in place: in-place ops get a clone, as in the reference.
      if (a.mutated) return IValue(call_op_named("clone", {t})[0]);
    }
    return IValue(t);
  }

  const OpInfo& op_;
  const json& case_;
  bool strided_;
  std::set<int> grad_indices_;
  std::map<int, Tensor> leaves_;
  int flat_ = 0;
};

// Why `got` differs from `expected` (dtype, shape, or the first element outside the tolerance), or "".
std::string mismatch(const Tensor& got, const Tensor& expected, Tolerance tol) {
  if (!got.defined()) return "kiln returned an undefined tensor";
  if (got.dtype() != expected.dtype())
    return fmt::format("dtype: kiln {} vs PyTorch {}", dtype_name(got.dtype()), dtype_name(expected.dtype()));
  if (got.sizes() != expected.sizes())
    return fmt::format("shape: kiln {} vs PyTorch {}", shape_str(got.sizes()), shape_str(expected.sizes()));
  std::vector<double> g = got.to_double_vector(), e = expected.to_double_vector();
  int bad = 0;
  std::string first;
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    double a = g[i], b = e[i];
    bool ok = (std::isnan(a) && std::isnan(b)) || a == b ||
              (std::isfinite(a) && std::isfinite(b) && std::abs(a - b) <= tol.atol + tol.rtol * std::abs(b));
    if (ok) continue;
    if (bad++ == 0) first = fmt::format("element {}: kiln {} vs PyTorch {}", i, a, b);
    if (std::isfinite(a) && std::isfinite(b)) worst = std::max(worst, std::abs(a - b));
  }
  if (bad == 0) return "";
  return fmt::format("{} of {} elements differ (rtol {}, atol {}); first: {}; largest finite difference {}", bad,
                     g.size(), tol.rtol, tol.atol, first, worst);
}

// The result of one case in one layout: "" when it matches, else what differs.
struct CaseResult {
  std::string forward, backward;
  bool has_grads = false;
};

std::string describe_exception(const std::exception& e, bool is_kiln) {
  return fmt::format("{}: {}", is_kiln ? "kiln::Error" : "non-kiln exception (a bug: user errors must be kiln::Error)",
                     e.what());
}

CaseResult run_case(const OpInfo& op, const json& c, bool strided) {
  CaseResult r;
  BuiltCall call;
  try {
    call = CallBuilder(op, c, strided).build();
  } catch (const std::exception& e) {
    r.forward = fmt::format("could not build the inputs: {}", e.what());
    return r;
  }
  std::vector<Tensor> outs;
  bool expect_error = c.contains("error");
  try {
    outs = call_op_named(op.name, call.positional, call.kwargs);
  } catch (const Error& e) {
    if (!expect_error) r.forward = "kiln threw " + describe_exception(e, true);
    return r;
  } catch (const std::exception& e) {
    r.forward = "kiln threw " + describe_exception(e, false);
    return r;
  }
  if (expect_error) {
    r.forward = fmt::format("PyTorch raises \"{}\" but kiln returned {} output(s)", c["error"].get<std::string>(),
                            outs.size());
    return r;
  }
  const json& files = c["outputs"];
  const json& dtypes = c["output_dtypes"];
  if (outs.size() != files.size()) {
    r.forward = fmt::format("kiln returned {} outputs, PyTorch {}", outs.size(), files.size());
    return r;
  }
  std::vector<Tensor> expected;
  for (size_t i = 0; i < files.size(); ++i) {
    DType dt = dtype_named(dtypes[i].get<std::string>());
    expected.push_back(load_tensor(files[i].get<std::string>(), dt));
    std::string m = mismatch(outs[i], expected[i], tolerance_for(dt));
    if (!m.empty() && r.forward.empty()) r.forward = fmt::format("output {}: {}", i, m);
  }
  if (!c.contains("grads")) return r;
  r.has_grads = true;
  std::vector<Tensor> grad_outputs, inputs;
  for (size_t i = 0; i < c["grad_output"].size(); ++i)
    grad_outputs.push_back(load_tensor(c["grad_output"][i].get<std::string>(), expected[i].dtype()));
  std::vector<std::pair<int, std::string>> wanted;
  for (const auto& [k, file] : c["grads"].items()) {
    wanted.emplace_back(std::stoi(k), file.get<std::string>());
    inputs.push_back(call.leaves.at(std::stoi(k)));
  }
  std::vector<Tensor> grads;
  try {
    grads = kiln::grad(outs, inputs, grad_outputs);
  } catch (const Error& e) {
    r.backward = "kiln::grad threw " + describe_exception(e, true);
    return r;
  } catch (const std::exception& e) {
    r.backward = "kiln::grad threw " + describe_exception(e, false);
    return r;
  }
  for (size_t i = 0; i < wanted.size(); ++i) {
    Tensor want = load_tensor(wanted[i].second, inputs[i].dtype());
    Tensor got = grads[i];
    if (!got.defined()) {  // no gradient flowed: PyTorch materialises zeros
      got = Tensor::empty(want.sizes(), want.dtype());
      copy_into(got, Tensor::scalar(0, want.dtype()));
    }
    std::string m = mismatch(got, want, tolerance_for(want.dtype()));
    if (!m.empty() && r.backward.empty()) r.backward = fmt::format("gradient of input {}: {}", wanted[i].first, m);
  }
  return r;
}

// Totals over the whole run, printed after the last test.
struct Summary {
  int ops = 0, ops_matched = 0, cases = 0, cases_matched = 0, grad_cases = 0, grads_matched = 0, kept = 0;
  std::vector<std::string> failing_ops;
};
Summary& summary() {
  static Summary s;
  return s;
}

class GoldenSummaryPrinter : public ::testing::Environment {
 public:
  void TearDown() override {
    const Summary& s = summary();
    if (s.ops == 0) return;
    std::string failing;
    for (const std::string& op : s.failing_ops) failing += (failing.empty() ? "" : ", ") + op;
    fmt::print("\n[golden] ops matched: {}/{}; cases matched: {}/{} (contiguous and strided inputs); gradient "
               "cases matched: {}/{}; kept divergences: {}; cases the generator dropped: {}\n",
               s.ops_matched, s.ops, s.cases_matched, s.cases, s.grads_matched, s.grad_cases, s.kept,
               manifest().is_null() ? 0 : manifest()["dropped"].size());
    if (!failing.empty()) fmt::print("[golden] ops with differences: {}\n", failing);
  }
};
[[maybe_unused]] ::testing::Environment* const kSummaryEnv =
    ::testing::AddGlobalTestEnvironment(new GoldenSummaryPrinter);

bool tested_kind(const OpInfo& op) { return op.kind != OpKind::Random && op.kind != OpKind::Backward; }

std::vector<std::string> golden_op_names() {
  std::vector<std::string> names;
  for (const OpInfo& op : all_ops())
    if (tested_kind(op)) names.emplace_back(op.name);
  return names;
}

class GoldenOp : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenOp, MatchesPyTorch) {
  ASSERT_FALSE(manifest().is_null()) << "missing " << kGoldenDir << "/manifest.json: run tests/golden/gen_goldens.py "
                                     << "(see docs/golden-tests.md)";
  const std::string& name = GetParam();
  const OpInfo* op = find_op(name);
  ASSERT_NE(op, nullptr);
  Summary& s = summary();
  ++s.ops;
  int cases = 0;
  bool all_matched = true;
  // Without a kernel or a decomposition every call throws, which would pass the error cases by accident.
  bool implemented = op->kernel || op->decomp;
  for (const json& c : manifest()["cases"]) {
    if (c["op"] != name) continue;
    ++cases;
    if (!implemented) {
      s.cases += kLayoutDependentOps.count(name) ? 1 : 2;
      all_matched = false;
      continue;
    }
    std::string id = c["id"].get<std::string>();
    if (auto kept = kept_divergence(c)) {
      ++s.kept;
      fmt::print("[golden] {} ({}): kept divergence: {}\n", id, c["note"].get<std::string>(), *kept);
      continue;
    }
    for (bool strided : {false, true}) {
      if (strided && kLayoutDependentOps.count(name)) continue;
      ++s.cases;
      CaseResult r = run_case(*op, c, strided);
      if (r.has_grads) ++s.grad_cases;
      if (r.has_grads && r.forward.empty() && r.backward.empty()) ++s.grads_matched;
      std::string where = fmt::format("{} [{}; {}, {} inputs]", id, c["note"].get<std::string>(),
                                      c["dtype"].get<std::string>(), strided ? "strided" : "contiguous");
      if (r.forward.empty() && r.backward.empty()) {
        ++s.cases_matched;
        continue;
      }
      all_matched = false;
      if (!r.forward.empty()) ADD_FAILURE() << where << ": " << r.forward;
      if (!r.backward.empty()) ADD_FAILURE() << where << ": backward: " << r.backward;
    }
  }
  EXPECT_GT(cases, 0) << name << " has no golden cases: regenerate with tests/golden/gen_goldens.py";
  EXPECT_TRUE(implemented) << name << " has neither a kernel nor a decomposition: its " << cases
                           << " golden cases did not run";
  if (all_matched && cases > 0) ++s.ops_matched;
  else s.failing_ops.push_back(name);
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenOp, ::testing::ValuesIn(golden_op_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(GoldenManifest, MatchesTheOpTableAndKeptDivergences) {
  ASSERT_FALSE(manifest().is_null()) << "missing golden manifest";
  std::set<std::string> ids;
  for (const json& c : manifest()["cases"]) {
    ids.insert(c["id"].get<std::string>());
    const OpInfo* op = find_op(c["op"].get<std::string>());
    ASSERT_NE(op, nullptr) << c["op"] << " is not in ops.def (stale goldens?)";
    EXPECT_TRUE(tested_kind(*op)) << c["id"];
  }
  for (const auto& [id, reason] : kept_divergences())
    EXPECT_TRUE(ids.count(id)) << "kept divergence " << id << " names no case in the manifest";
}

}  // namespace
