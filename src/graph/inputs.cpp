// Seeded and file-based graph inputs. Integer inputs used as indices or class targets get a bound derived
// from how the graph uses them, so a seeded run of a graph with cross_entropy or embedding is valid.
#include "graph/inputs.h"
#include "eager/device_copy.h"

#include <algorithm>
#include <filesystem>

#include "core/files.h"
#include "eager/npy.h"
#include "eager/loops.h"
#include "eager/philox.h"
#include "ops/api.h"
#include "ops/dispatch.h"

namespace kiln::graph {

namespace {

// The exclusive upper bound an integer value must respect given its uses (INT64_MAX when unconstrained).
int64_t index_bound(const Graph& g, ValueId id) {
  int64_t bound = INT64_MAX;
  auto size_of = [&](const Arg& a, int64_t dim) -> int64_t {
    const auto* t = std::get_if<TensorArg>(&a);
    if (!t) return INT64_MAX;
    const Shape& s = g.value(t->id).meta.sizes;
    if (s.empty()) return INT64_MAX;
    int64_t d = dim < 0 ? dim + int64_t(s.size()) : dim;
    return d >= 0 && d < int64_t(s.size()) ? s[size_t(d)] : INT64_MAX;
  };
  auto int_arg = [](const Arg& a) -> int64_t {
    const auto* s = std::get_if<Scalar>(&a);
    return s ? s->to_int() : 0;
  };
  for (const Node& n : g.nodes()) {
    if (n.kind != NodeKind::Op) continue;
    for (size_t i = 0; i < n.args.size(); ++i) {
      const auto* t = std::get_if<TensorArg>(&n.args[i]);
      const auto* l = std::get_if<TensorListArg>(&n.args[i]);
      bool direct = t && t->id == id;
      switch (n.op) {
        case OpId::cross_entropy:
        case OpId::nll_loss:
          if (direct && i == 1) {  // class targets: the class dim is 1 for batched input, 0 for unbatched
            int64_t classes = size_of(n.args[0], 1);
            bound = std::min(bound, classes != INT64_MAX ? classes : size_of(n.args[0], 0));
          }
          break;
        case OpId::embedding:
          if (direct && i == 1) bound = std::min(bound, size_of(n.args[0], 0));
          break;
        case OpId::index_select:
        case OpId::gather:
        case OpId::scatter:
        case OpId::scatter_add:
          if (direct && i == 2) bound = std::min(bound, size_of(n.args[0], int_arg(n.args[1])));
          break;
        case OpId::index:
        case OpId::index_put:
          if (l)
            for (size_t k = 0; k < l->ids.size(); ++k)
              if (l->ids[k] == id) bound = std::min(bound, size_of(n.args[0], int64_t(k)));
          break;
        default:
          break;
      }
    }
  }
  return bound;
}

// output_<digits>: the files outputs are dumped to.
bool is_reserved_stem(std::string_view s) {
  constexpr std::string_view kOutput = "output_";
  if (!s.starts_with(kOutput) || s.size() == kOutput.size()) return false;
  return std::all_of(s.begin() + kOutput.size(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string input_file_name(std::string_view name) {
  // A reserved stem starts with 'o': escaping it keeps the encoding injective (a literal '%' is always escaped).
  if (is_reserved_stem(name)) return "%6F" + safe_file_stem(name.substr(1)) + ".npy";
  return safe_file_stem(name) + ".npy";
}

std::string output_file_name(size_t k) { return fmt::format("output_{}.npy", k); }

namespace {

// Whether `strides` lay `sizes` out densely: every element at its own offset, no gaps (contiguous, permuted,
// column-major). Expanded (stride 0) and sliced layouts are not.
bool is_dense_layout(const Shape& sizes, const Shape& strides) {
  std::vector<size_t> dims;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] != 1) dims.push_back(d);
  std::sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return strides[a] < strides[b]; });
  int64_t expected = 1;
  for (size_t d : dims) {
    if (sizes[d] == 0) return true;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

// `t` (contiguous, as generated or read from a .npy) in the layout and on the device `m` declares.
Tensor in_declared_layout(const TensorMeta& m, Tensor t) {
  if (m.strides != t.strides() && t.numel() != 0) {
    Tensor strided = Tensor::empty_strided(m.sizes, m.strides, m.dtype);
    copy_into(strided, t);
    t = strided;
  }
  return to_device(t, m.device);
}

}  // namespace

std::vector<Tensor> seeded_inputs(const Graph& g, uint64_t seed) {
  GeneratorState saved = default_generator();
  manual_seed(seed);
  std::vector<Tensor> out;
  for (ValueId id : g.inputs()) {
    const ValueInfo& v = g.value(id);
    const TensorMeta& m = v.meta;
    Tensor t;
    if (is_floating(m.dtype)) {
      t = randn(m.sizes, m.dtype);
    } else if (m.dtype == DType::Bool) {
      t = lt(rand(m.sizes), 0.5);
    } else {
      int64_t bound = std::min<int64_t>(index_bound(g, id), 10);
      t = randint(0, std::max<int64_t>(bound, 1), m.sizes, m.dtype);
    }
    t = in_declared_layout(m, t);
    if (v.requires_grad) t.set_requires_grad(true);
    out.push_back(t);
  }
  default_generator() = saved;
  return out;
}

std::vector<Tensor> load_inputs(const Graph& g, const std::string& dir) {
  std::vector<Tensor> out;
  for (ValueId id : g.inputs()) {
    const ValueInfo& v = g.value(id);
    const std::string file = input_file_name(v.name);
    std::string path = confined_path(dir, file, fmt::format("inputs: the file of %{}", v.name)).string();
    KILN_CHECK(std::filesystem::exists(path), "inputs: {} is missing (one .npy per graph input, named after it: "
               "%{} -> {}; docs/cli.md, File names)", path, v.name, file);
    Tensor t = read_npy(path, v.meta.dtype == DType::BF16 ? std::optional<DType>(DType::BF16) : std::nullopt);
    KILN_CHECK(t.dtype() == v.meta.dtype && t.sizes() == v.meta.sizes, "inputs: {} holds {} but the graph's %{} is {}{}",
               path, t.str(), v.name, dtype_name(v.meta.dtype), shape_str(v.meta.sizes));
    t = in_declared_layout(v.meta, t);
    if (v.requires_grad) t.set_requires_grad(true);
    out.push_back(t);
  }
  return out;
}

Tensor layout_preserving_copy(const Tensor& t, DType dtype) {
  NoGradGuard no_grad;
  if (!is_dense_layout(t.sizes(), t.strides())) return history_free_alias(to(clone(t), dtype));
  Tensor copy = Tensor::empty_strided(t.sizes(), t.strides(), dtype, t.device());
  copy_into(copy, t);
  return copy;
}

std::vector<Tensor> copy_inputs(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> out;
  out.reserve(inputs.size());
  for (const Tensor& t : inputs) out.push_back(t.defined() ? layout_preserving_copy(t, t.dtype()) : t);
  return out;
}

void save_inputs(const Graph& g, const std::vector<Tensor>& inputs, const std::string& dir) {
  KILN_CHECK(inputs.size() == g.inputs().size(), "save_inputs: {} tensors for {} graph inputs", inputs.size(),
             g.inputs().size());
  create_output_directory(dir);
  for (size_t i = 0; i < inputs.size(); ++i)
    write_npy(confined_path(dir, input_file_name(g.value(g.inputs()[i]).name), "a dumped input").string(), inputs[i]);
}

}  // namespace kiln::graph
