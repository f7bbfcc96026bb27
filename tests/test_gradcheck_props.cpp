// Op-table-wide properties, one GoogleTest per op so a failure names it:
//  - Gradcheck: for every differentiable op, autograd's gradients (the VJP, or autograd through the
//    decomposition) match central finite differences on random samples from op_samples.cpp.
//  - ShapeInference: for every op, running on meta tensors gives the sizes and dtypes the kernel produces.
//  - Decomposition: for ops with both a kernel and a decomposition, the two agree (values and gradients).
// Each property runs 25 cases by default; RC_PARAMS="max_success=N" overrides (and seed=... reproduces).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "autograd/autograd.h"
#include "autograd/gradcheck.h"
#include "eager/philox.h"
#include "op_samples.h"
#include "ops/api.h"
#include "ops/dispatch.h"

using namespace kiln;

namespace {

struct OpRow {
  std::string name;
  bool differentiable;
};

// The rows of ops.def, read at compile time (no op-table lookups during static initialisation).
std::vector<OpRow> op_rows(bool differentiable_only) {
  std::vector<OpRow> rows = {
#define KILN_OP(id, family, kind, flags, schema, ...) {#id, std::string_view(#flags) == "D"},
#include "ops/ops.def"
#undef KILN_OP
  };
  if (differentiable_only) std::erase_if(rows, [](const OpRow& r) { return !r.differentiable; });
  return rows;
}

std::string row_name(const ::testing::TestParamInfo<OpRow>& info) { return info.param.name; }
void PrintTo(const OpRow& row, std::ostream* os) { *os << row.name; }

const std::map<std::string, rc::Gen<OpSample>>& samples_of(bool differentiable) {
  static const auto diff = differentiable_op_samples();
  static const auto non_diff = non_differentiable_op_samples();
  return differentiable ? diff : non_diff;
}

// The sample's positional args, with fresh copies for the arguments the op writes to (a leaf that requires
// grad cannot be written in place, and the sample must stay unchanged across calls). With
// write_through_view the copy is a view into a fresh base, which is appended to `bases`.
std::vector<IValue> call_args(const OpInfo& op, const OpSample& sample, std::vector<Tensor>* bases = nullptr) {
  std::vector<IValue> args = sample.args;
  for (size_t i = 0; i < args.size() && i < op.schema.args.size(); ++i) {
    if (!op.schema.args[i].mutated || !args[i].is_tensor()) continue;
    if (sample.write_through_view && bases) {
      Tensor base = clone(unsqueeze(args[i].tensor(), 0));
      bases->push_back(base);
      args[i] = select(base, 0, 0);
    } else {
      args[i] = clone(args[i].tensor());
    }
  }
  return args;
}

// Random ops (dropout) draw the same numbers on every call, so finite differences see one function.
constexpr uint64_t kSampleSeed = 1234;

// The op's outputs, then the bases written through (write_through_view).
std::vector<Tensor> run_sample(const OpInfo& op, const OpSample& sample) {
  manual_seed(kSampleSeed);
  std::vector<Tensor> bases;
  std::vector<Tensor> outs = call_op_named(op.name, call_args(op, sample, &bases), sample.kwargs);
  outs.insert(outs.end(), bases.begin(), bases.end());
  return outs;
}

// ---------------------------------------------------------------- gradcheck
class Gradcheck : public ::testing::TestWithParam<OpRow> {};

TEST_P(Gradcheck, MatchesFiniteDifferences) {
  const std::string& name = GetParam().name;
  const OpInfo* op = find_op(name);
  ASSERT_NE(op, nullptr) << name;
  auto it = samples_of(true).find(name);
  ASSERT_NE(it, samples_of(true).end()) << name << ": no sample generator in tests/op_samples.cpp";
  const rc::Gen<OpSample>& gen = it->second;
  check_property("Gradcheck/" + name, [&] {
    OpSample sample = *gen;
    DiffFn f = [&](const std::vector<Tensor>&) { return run_sample(*op, sample); };
    GradcheckResult r = gradcheck(f, sample.flat_tensors());
    if (!r.ok) RC_FAIL(name + ": " + r.message);
  });
}

INSTANTIATE_TEST_SUITE_P(Ops, Gradcheck, ::testing::ValuesIn(op_rows(true)), row_name);

// ---------------------------------------------------------------- shape inference
// The sample with its floating tensors cast to `dtype` (no grad), so inference is checked across dtypes.
OpSample with_float_dtype(const OpSample& sample, DType dtype) {
  NoGradGuard no_grad;
  auto cast = [&](IValue& v) {
    auto one = [&](Tensor& t) {
      if (t.defined() && is_floating(t.dtype())) t = to(t, dtype).detach();
    };
    if (v.is_tensor()) one(v.tensor());
    if (v.is_tensor_list())
      for (Tensor& t : v.tensor_list()) one(t);
  };
  OpSample out = sample;
  for (IValue& v : out.args) cast(v);
  for (auto& [name, v] : out.kwargs) cast(v);
  return out;
}

// The sample with every tensor replaced by a meta tensor of the same dtype, sizes and strides.
OpSample as_meta(const OpSample& sample) {
  auto meta = [](IValue& v) {
    if (v.is_tensor() && v.tensor().defined()) v = Tensor::meta(v.tensor().meta());
    if (v.is_tensor_list())
      for (Tensor& t : v.tensor_list())
        if (t.defined()) t = Tensor::meta(t.meta());
  };
  OpSample out = sample;
  for (IValue& v : out.args) meta(v);
  for (auto& [name, v] : out.kwargs) meta(v);
  return out;
}

std::string metas_str(const std::vector<TensorMeta>& metas) {
  std::string s;
  for (const TensorMeta& m : metas) s += fmt::format("{}{} ", dtype_name(m.dtype), shape_str(m.sizes));
  return s;
}

class ShapeInference : public ::testing::TestWithParam<OpRow> {};

TEST_P(ShapeInference, MetaAgreesWithKernel) {
  const std::string& name = GetParam().name;
  const OpInfo* op = find_op(name);
  ASSERT_NE(op, nullptr) << name;
  const auto& table = samples_of(GetParam().differentiable);
  auto it = table.find(name);
  ASSERT_NE(it, table.end()) << name << ": no sample generator in tests/op_samples.cpp";
  const rc::Gen<OpSample>& gen = it->second;
  check_property("ShapeInference/" + name, [&] {
    DType dtype = *rc::gen::element(DType::F64, DType::F32, DType::F16, DType::BF16);
    OpSample sample = with_float_dtype(*gen, dtype);
    NoGradGuard no_grad;
    std::vector<TensorMeta> real;
    for (const Tensor& t : run_sample(*op, sample)) real.push_back(t.meta());
    OpSample meta = as_meta(sample);
    auto infer = [&] {
      std::vector<TensorMeta> out;
      if (meta.flat_tensors().empty()) return infer_meta(bind_args(*op, call_args(*op, meta), meta.kwargs));
      for (const Tensor& t : run_sample(*op, meta)) {
        RC_ASSERT(t.is_meta());
        out.push_back(t.meta());
      }
      return out;
    };
    if (sample.shape_depends_on_data) {
      RC_ASSERT_THROWS_AS(infer(), Error);
      return;
    }
    std::vector<TensorMeta> inferred = infer();
    RC_LOG() << "kernel: " << metas_str(real) << "\ninferred: " << metas_str(inferred) << "\n";
    RC_ASSERT(inferred.size() == real.size());
    for (size_t i = 0; i < real.size(); ++i) {
      RC_ASSERT(inferred[i].sizes == real[i].sizes);
      RC_ASSERT(inferred[i].dtype == real[i].dtype);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ops, ShapeInference, ::testing::ValuesIn(op_rows(false)), row_name);

// ---------------------------------------------------------------- kernel vs decomposition
// Ops with both an eager kernel and a decomposition: the two give the same values, and autograd through the
// decomposition passes gradcheck too (the dispatcher only ever differentiates the kernel's VJP).
std::vector<Tensor> run_decomposition(const OpInfo& op, const OpSample& sample) {
  manual_seed(kSampleSeed);
  return op.decomp(bind_args(op, call_args(op, sample), sample.kwargs));
}

// Whether a and b hold the same values (f64 rounding differences allowed; NaNs match NaNs).
bool same_values(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to_double_vector(), y = b.to_double_vector();
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) {
      if (std::isnan(x[i]) != std::isnan(y[i])) return false;
    } else if (x[i] != y[i] && std::abs(x[i] - y[i]) > 1e-12 + 1e-9 * std::abs(y[i])) {
      return false;
    }
  }
  return true;
}

class Decomposition : public ::testing::TestWithParam<OpRow> {};

TEST_P(Decomposition, AgreesWithKernel) {
  const std::string& name = GetParam().name;
  const OpInfo* op = find_op(name);
  ASSERT_NE(op, nullptr) << name;
  if (!op->kernel || !op->decomp) GTEST_SKIP() << name << " does not have both a kernel and a decomposition";
  const auto& table = samples_of(GetParam().differentiable);
  auto it = table.find(name);
  ASSERT_NE(it, table.end()) << name << ": no sample generator in tests/op_samples.cpp";
  const rc::Gen<OpSample>& gen = it->second;
  check_property("Decomposition/" + name, [&] {
    OpSample sample = *gen;
    {
      NoGradGuard no_grad;
      std::vector<Tensor> kernel_out = run_sample(*op, sample), decomp_out = run_decomposition(*op, sample);
      RC_ASSERT(kernel_out.size() == decomp_out.size());
      for (size_t i = 0; i < kernel_out.size(); ++i) {
        RC_LOG() << "output " << i << ": kernel " << format_tensor(kernel_out[i]) << "\ndecomposition "
                 << format_tensor(decomp_out[i]) << "\n";
        RC_ASSERT(kernel_out[i].sizes() == decomp_out[i].sizes());
        RC_ASSERT(kernel_out[i].dtype() == decomp_out[i].dtype());
        RC_ASSERT(same_values(kernel_out[i], decomp_out[i]));
      }
    }
    if (!op->differentiable) return;
    DiffFn f = [&](const std::vector<Tensor>&) { return run_decomposition(*op, sample); };
    GradcheckResult r = gradcheck(f, sample.flat_tensors());
    if (!r.ok) RC_FAIL(name + " (through its decomposition): " + r.message);
  });
}

INSTANTIATE_TEST_SUITE_P(Ops, Decomposition, ::testing::ValuesIn(op_rows(false)), row_name);

}  // namespace
