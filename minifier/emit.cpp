// emit_cpp / emit_torch: text generation only; each argument kind of the IR has one rendering per language.
#include "minifier/emit.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "api/backends.h"
#include "core/files.h"
#include "eager/npy.h"
#include "graph/inputs.h"
#include "graph/interpreter.h"
#include "graph/text.h"
#include "minifier/inject_backend.h"
#include "ops/op_info.h"
#include "repro/reproduce.h"

namespace kiln::minify {

namespace {

std::string py_str(const std::string& s) { return nlohmann::json(s).dump(); }  // JSON strings are Python strings

std::string py_scalar(const Scalar& s) {
  std::string v = s.str();
  if (v == "nan") return "float('nan')";
  if (v == "inf") return "float('inf')";
  if (v == "-inf") return "float('-inf')";
  return v;
}

std::string py_list(const std::vector<int64_t>& v) {
  return fmt::format("[{}]", fmt::join(v, ", "));
}

// One Python identifier per value name, injective: `%h.1` and `%h_1` both sanitise to `v_h_1`, so a later
// name that sanitises to a taken identifier gets a numbered suffix.
class PyNames {
 public:
  explicit PyNames(const graph::Graph& g) {
    std::set<std::string> taken;
    for (graph::ValueId id = 0; id < g.num_values(); ++id) {
      std::string base = "v_";
      for (char c : g.value(id).name) base += (std::isalnum(uint8_t(c)) || c == '_') ? c : '_';
      std::string name = base;
      for (int k = 2; taken.count(name); ++k) name = fmt::format("{}_{}", base, k);
      taken.insert(name);
      names_.push_back(name);
    }
  }
  const std::string& operator()(graph::ValueId id) const { return names_.at(size_t(id)); }

 private:
  std::vector<std::string> names_;
};

std::string py_constant(const graph::Graph& g, graph::ValueId id, const Tensor& t) {
  std::vector<double> v = t.to_double_vector();
  std::vector<std::string> items;
  for (double x : v) {
    if (t.dtype() == DType::Bool) items.push_back(x != 0 ? "True" : "False");
    else if (!is_floating(t.dtype())) items.push_back(fmt::format("{}", int64_t(x)));
    else items.push_back(py_scalar(Scalar(x)));
  }
  if (g.value(id).wrapped_number && items.size() == 1) return items[0];  // a Python number operand
  return fmt::format("torch.tensor([{}], dtype={}).reshape({})", fmt::join(items, ", "), dtype_torch_name(t.dtype()),
                     py_list(t.sizes()));
}

// Whether a node argument equals its schema default (then it is left out: ATen's overloads differ in which
// optional arguments they take, and `squeeze(x, None)` or `bernoulli(x, None)` match none of them).
bool is_default_arg(const graph::Arg& a, const ArgSpec& spec) {
  if (!spec.default_value) return false;
  const IValue& d = *spec.default_value;
  if (std::holds_alternative<std::monostate>(a)) return d.is_none();
  if (auto* s = std::get_if<Scalar>(&a))
    return d.is_scalar() && s->is_bool() == d.scalar().is_bool() && s->to_double() == d.scalar().to_double();
  if (auto* l = std::get_if<IntList>(&a)) return d.is_int_list() && d.int_list() == *l;
  if (auto* dt = std::get_if<DType>(&a)) return d.is_dtype() && d.dtype() == *dt;
  if (auto* str = std::get_if<std::string>(&a)) return d.is_string() && d.string() == *str;
  return false;
}

// How a kiln op is called in ATen where that differs from kiln's row: another name, an argument ATen requires
// that kiln's schema leaves out, or no ATen operator at all (kiln's own backward helpers).
struct AtenSpelling {
  std::string_view kiln, aten, extra_args;
};
constexpr AtenSpelling kAtenSpellings[] = {
    {"cross_entropy", "cross_entropy_loss", ""},
    {"batch_norm", "batch_norm", "cudnn_enabled=False"},
    {"conv2d_backward_input", "", ""},
    {"conv2d_backward_weight", "", ""},
    {"max_pool2d_backward", "", ""},
    {"avg_pool2d_backward", "", ""},
};

const AtenSpelling* aten_spelling(std::string_view kiln_name) {
  for (const AtenSpelling& a : kAtenSpellings)
    if (a.kiln == kiln_name) return &a;
  return nullptr;
}

// A node as one `torch.ops.aten` call: arguments in schema order, defaulted ones left out; after a left-out
// argument the rest go by keyword.
std::string py_call(const graph::Graph& g, const graph::Node& n, const PyNames& names) {
  const Schema& sc = n.info().schema;
  std::vector<std::string> args;
  bool by_keyword = false;
  for (size_t a = 0; a < n.args.size(); ++a) {
    if (is_default_arg(n.args[a], sc.args[a])) {
      by_keyword = true;
      continue;
    }
    std::string v = std::visit([&](const auto& x) -> std::string {
      using V = std::decay_t<decltype(x)>;
      if constexpr (std::is_same_v<V, std::monostate>) return "None";
      else if constexpr (std::is_same_v<V, graph::TensorArg>) return names(x.id);
      else if constexpr (std::is_same_v<V, graph::TensorListArg>) {
        std::vector<std::string> e;
        for (graph::ValueId id : x.ids) e.push_back(id == graph::kNoValue ? "None" : names(id));
        return fmt::format("[{}]", fmt::join(e, ", "));
      } else if constexpr (std::is_same_v<V, Scalar>) return py_scalar(x);
      else if constexpr (std::is_same_v<V, IntList>) {
        // squeeze.dim (an int) is the overload every PyTorch has; squeeze.dims (a list) came with 2.0.
        if (n.op == OpId::squeeze && x.size() == 1) return std::to_string(x[0]);
        return py_list(x);
      } else if constexpr (std::is_same_v<V, DType>) return std::string(dtype_torch_name(x));
      else return py_str(x);
    }, n.args[a]);
    by_keyword |= sc.args[a].kwarg_only;
    args.push_back(by_keyword ? sc.args[a].name + "=" + v : v);
  }
  const AtenSpelling* spelling = aten_spelling(n.info().name);
  if (spelling && spelling->aten.empty())
    return fmt::format("no_aten_op({})", py_str(std::string(n.info().name)));
  if (spelling && !spelling->extra_args.empty()) args.emplace_back(spelling->extra_args);
  return fmt::format("torch.ops.aten.{}({})", spelling ? spelling->aten : n.info().name, fmt::join(args, ", "));
}

}  // namespace

namespace {

// A C++ string literal holding `text` exactly (JSON's escapes are C++'s): no value of the repro (a name, a
// message, the graph's text) can end the literal and become code.
std::string cpp_literal(const std::string& text) { return nlohmann::json(text).dump(); }

// `text` for a comment (C++ `//` or Python `#`): one line of printable characters.
std::string comment_text(std::string text) {
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return text;
}

}  // namespace

namespace {

// The script's opening comment and settings: where it came from, what it does, its inputs and tolerance.
std::string torch_header(const ReproFile& r, const std::string& repro_path) {
  std::string s;
  s += "# Generated by kiln (`kiln minify --emit torch` or `kiln run --dump DIR --emit torch`) from " +
       comment_text(std::filesystem::path(repro_path).filename().string()) + ": the graph as PyTorch ATen calls\n";
  s += fmt::format("# (kiln backend {}, recorded failure: {}). Runs it eagerly, compares with kiln's reference\n",
                   comment_text(r.backend), comment_text(std::string(failure_kind_name(r.expected.kind))));
  s += "# interpreter's outputs (reference_<k>.npy) and kiln's backend outputs (output_<k>.npy) where the input\n";
  s += "# directory holds them, then under torch.compile and compares with eager.\n";
  s += "# Usage: python3 <this file> [torch.compile backend: a name, default inductor, or FILE.py:FUNCTION; `none`:\n";
  s += "# eager only]\n";
  s += "# Exit status: 0 when everything compared matches, 1 otherwise.\n";
  s += "import os\nimport sys\n\nimport numpy as np\nimport torch\n\n";
  s += "HERE = os.path.dirname(os.path.abspath(__file__))\n";
  s += fmt::format("INPUT_DIR = os.path.join(HERE, {})\n", py_str(r.input_dir.empty() ? "." : r.input_dir));
  s += fmt::format("TOLERANCE = {}  # kiln's comparator tolerance; f16 and bf16 allow 1e-2 and 2e-2\n\n", r.tolerance);
  return s;
}

// The fixed helpers every script shares: loading kiln's .npy files, comparing, reporting.
std::string torch_helpers() {
  std::string s;
  s += R"PY(

def load(name, dtype):
    """One .npy file as written by kiln: bf16 is stored as its raw 16-bit patterns (<u2)."""
    a = np.load(os.path.join(INPUT_DIR, name))
    if dtype == torch.bfloat16:  # older PyTorch cannot take uint16 arrays: the same bits as int16
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def no_aten_op(name):
    raise NotImplementedError(f"kiln op {name} is a kiln backward helper with no ATen operator")


def same(expected, actual):
    if expected.dtype != actual.dtype or expected.shape != actual.shape:
        return False
    if not expected.is_floating_point():
        return torch.equal(expected, actual)
    tol = {torch.float16: 1e-2, torch.bfloat16: 2e-2}.get(expected.dtype, TOLERANCE)
    return torch.allclose(expected.double(), actual.double(), rtol=tol, atol=tol, equal_nan=True)


def report(what, expected, actual):
    ok = True
    for i, (e, a) in enumerate(zip(expected, actual)):
        good = same(e, a)
        diff = (e.double() - a.double()).abs().max().item() if e.numel() and e.shape == a.shape else 0
        print(f"{what}: output {i}: {'ok' if good else 'MISMATCH'} (max abs diff {diff})")
        ok = ok and good
    return ok and len(expected) == len(actual)


def load_backend(spec):
    """A torch.compile backend: a registered name (inductor, aot_eager, ...) or FILE.py:FUNCTION, a function of
    (torch.fx.GraphModule, example inputs) returning a callable, as torch.compile's backends are."""
    if ":" not in spec:
        return spec
    path, _, name = spec.rpartition(":")
    import importlib.util
    module_spec = importlib.util.spec_from_file_location("kiln_torch_backend", path)
    if module_spec is None or not os.path.isfile(path):
        raise SystemExit(f"backend {spec}: {path} is not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    if not callable(getattr(module, name, None)):
        raise SystemExit(f"backend {spec}: {path} defines no function {name}")
    return getattr(module, name)


class CompileFailure(Exception):
    """An exception the backend raised while compiling (torch.compile reports it at the first call)."""


def compile_with(backend, model, inputs):
    """`model` compiled by `backend` (a name or a function). PyTorch without torch.compile (1.13) takes a
    function only, given the module as torch.fx traces it, as torch.compile would give it the captured graph."""
    def marked(fn):
        def compile_graph(gm, example_inputs):
            try:
                return fn(gm, example_inputs)
            except Exception as e:
                raise CompileFailure(f"{type(e).__name__}: {e}") from e
        return compile_graph
    if hasattr(torch, "compile"):
        fn = backend
        if isinstance(backend, str):
            from torch._dynamo import lookup_backend
            fn = lookup_backend(backend)
        return torch.compile(model, backend=marked(fn))
    if isinstance(backend, str):
        raise SystemExit(f"PyTorch {torch.__version__} has no torch.compile: name the backend as FILE.py:FUNCTION")
    return marked(backend)(torch.fx.symbolic_trace(model), inputs)


def first_line(e):
    text = f"{type(e).__name__}: {e}"
    return text.splitlines()[0] if text else type(e).__name__


def compile_failure_in(e):
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, CompileFailure):
            return e
        e = e.__cause__ or e.__context__
    return None


def rmse(a, b):
    return torch.sqrt(torch.mean(torch.square(a.double() - b.double()))).item() if a.numel() else 0.0


def same_with_fp64(expected, actual, fp64):
    """PyTorch's same() rule (torch._dynamo.utils.same): equal for integers; for floating outputs close within
    the tolerance, or, given the fp64 reference, no further from it than 3x eager's distance plus tol/10."""
    if expected.dtype != actual.dtype or expected.shape != actual.shape:
        return False
    if same(expected, actual):
        return True
    if not expected.is_floating_point() or fp64 is None or fp64.shape != expected.shape:
        return False
    tol = {torch.float16: 1e-2, torch.bfloat16: 2e-2}.get(expected.dtype, TOLERANCE)
    return rmse(fp64, actual) <= 3.0 * rmse(fp64, expected) + tol / 10.0


def judge(backend):
    """What `backend` does to this graph, by kiln's failure kinds: a dict of kind (none, compile_error,
    runtime_error, accuracy; eager_error when eager fails: then the graph, not the compiler, is wrong), message
    (one line, the same for the same failure) and detail. `kiln minify --oracle torch` asks its worker this."""
    import traceback
    inputs = load_inputs()
    model = Repro()
    try:
        expected = model(*[x.clone() for x in inputs])
    except Exception as e:
        return {"kind": "eager_error", "message": first_line(e), "detail": traceback.format_exc()}
    try:
        actual = compile_with(backend, model, inputs)(*[x.clone() for x in inputs])
    except Exception as e:
        failure = compile_failure_in(e)
        kind = "compile_error" if failure is not None else "runtime_error"
        return {"kind": kind, "message": str(failure) if failure is not None else first_line(e),
                "detail": traceback.format_exc()}
    try:
        fp64 = model(*[x.clone().double() if x.is_floating_point() else x.clone() for x in inputs])
    except Exception:
        fp64 = [None] * len(expected)
    bad = [i for i, (e, a, r) in enumerate(zip(expected, actual, fp64)) if not same_with_fp64(e, a, r)]
    if bad or len(expected) != len(actual):
        detail = "; ".join(f"output {i}: max abs diff {(expected[i].double() - actual[i].double()).abs().max().item()}"
                           if expected[i].shape == actual[i].shape and expected[i].numel() else f"output {i}"
                           for i in bad) or f"{len(actual)} outputs, eager has {len(expected)}"
        return {"kind": "accuracy", "message": "the compiled outputs differ from eager by PyTorch's same() rule "
                "(fp64 reference)", "detail": detail}
    return {"kind": "none", "message": "", "detail": ""}

)PY";
  return s;
}

// The graph as a torch.nn.Module (one ATen call per node), its inputs and its output dtypes.
std::string torch_module(const graph::Graph& g) {
  const PyNames names(g);
  std::string s;
  s += "\nclass Repro(torch.nn.Module):\n";
  std::vector<std::string> params;
  for (graph::ValueId id : g.inputs()) params.push_back(names(id));
  s += fmt::format("    def forward(self{}{}):\n", params.empty() ? "" : ", ", fmt::join(params, ", "));
  for (const graph::Node& n : g.nodes()) {
    if (n.kind == graph::NodeKind::Constant) {
      s += fmt::format("        {} = {}\n", names(n.outputs[0]), py_constant(g, n.outputs[0], n.constant));
      continue;
    }
    const Schema& sc = n.info().schema;
    std::vector<std::string> outs;
    for (graph::ValueId o : n.outputs) outs.push_back(names(o));
    std::string lhs = outs.size() == 1 && !sc.returns_list && sc.num_returns == 1
                          ? outs[0] : fmt::format("{}{}", fmt::join(outs, ", "), outs.size() == 1 ? "," : "");
    s += fmt::format("        {} = {}\n", lhs, py_call(g, n, names));
  }
  std::vector<std::string> results;
  for (graph::ValueId id : g.outputs()) results.push_back(names(id));
  s += fmt::format("        return ({}{})\n\n\n", fmt::join(results, ", "), results.size() == 1 ? "," : "");
  s += "def load_inputs():\n    return [\n";
  for (graph::ValueId id : g.inputs())
    s += fmt::format("        load({}, {}),\n", py_str(graph::input_file_name(g.value(id).name)),
                     dtype_torch_name(g.value(id).meta.dtype));
  s += "    ]\n\n\n";
  std::vector<std::string> out_dtypes;
  for (graph::ValueId id : g.outputs()) out_dtypes.push_back(std::string(dtype_torch_name(g.value(id).meta.dtype)));
  s += fmt::format("OUTPUT_DTYPES = [{}]\n\n\n", fmt::join(out_dtypes, ", "));
  return s;
}

// The script's main: eager, then kiln's outputs where present, then torch.compile; the exit status.
std::string torch_main() {
  std::string s;
  s += R"PY(def kiln_values(prefix):
    """kiln's outputs (output_<k>.npy: `kiln run --dump`, or a minified accuracy failure's backend) or its reference
    interpreter's (reference_<k>.npy: `kiln minify --emit torch`), when the input directory holds them."""
    files = [f"{prefix}_{k}.npy" for k in range(len(OUTPUT_DTYPES))]
    if not all(os.path.exists(os.path.join(INPUT_DIR, f)) for f in files):
        return None
    return [load(f, dt) for f, dt in zip(files, OUTPUT_DTYPES)]


if __name__ == "__main__":
    backend = sys.argv[1] if len(sys.argv) > 1 else "inductor"
    inputs = load_inputs()
    model = Repro()
    expected = model(*[x.clone() for x in inputs])
    ok = True
    reference = kiln_values("reference")
    if reference is not None:
        ok = report("PyTorch eager vs kiln's reference interpreter", expected, reference) and ok
    kiln = kiln_values("output")
    if kiln is not None:
        ok = report("PyTorch eager vs kiln", expected, kiln) and ok
    if reference is None and kiln is None:
        print("nothing of kiln's to compare with: no output_<k>.npy or reference_<k>.npy in the input directory")
    if backend == "none":
        print("torch.compile skipped (backend none)")
    elif not hasattr(torch, "compile") and ":" not in backend:
        print(f"torch.compile skipped: PyTorch {torch.__version__} has no torch.compile")
    else:
        result = judge(load_backend(backend))
        if result["kind"] == "none":
            print(f"torch.compile ({backend}) matches eager")
        else:
            print(f"torch.compile ({backend}) FAILS: {result['kind']}: {result['message']}\n{result['detail']}")
        ok = ok and result["kind"] == "none"
    sys.exit(0 if ok else 1)
)PY";
  return s;
}

}  // namespace

ReproFile with_torch_comparison_values(const ReproFile& r_in, const std::string& repro_path) {
  ReproFile r = r_in;
  for (const graph::Node& n : r.graph.nodes())  // PyTorch draws other random numbers: nothing to compare with
    if (n.kind == graph::NodeKind::Op && n.info().kind == OpKind::Random) return r;
  AppliedReproConfig applied(r);
  const std::vector<Tensor> inputs = repro_inputs(r, repro_path);
  const std::filesystem::path base = std::filesystem::path(repro_path).parent_path();
  if (r.input_dir.empty()) r.input_dir = std::filesystem::path(repro_path).filename().string() + ".inputs";
  const std::filesystem::path dir = base / r.input_dir;
  create_output_directory(dir.string());
  auto write_all = [&](const std::string& prefix, const std::vector<Tensor>& outs) {
    for (size_t k = 0; k < outs.size(); ++k)
      write_npy(confined_path(dir, fmt::format("{}_{}.npy", prefix, k), "a value the script compares with").string(),
                outs[k]);
  };
  write_all("reference", graph::run_graph(r.graph, graph::copy_inputs(inputs)));
  // An accuracy failure of the outputs shows in the backend's outputs (a gradient failure would need the backward:
  // the script compares outputs only); other kinds have no outputs.
  if (r.expected.kind == FailureKind::Accuracy && !r.gradients)
    write_all("output", find_backend(r.backend)(r.graph, graph::copy_inputs(inputs)));
  return r;
}

std::string emit_torch(const ReproFile& r, const std::string& repro_path) {
  return torch_header(r, repro_path) + torch_helpers() + torch_module(r.graph) + torch_main();
}


std::string emit_cpp(const ReproFile& r, const std::string& repro_path) {
  std::string name = std::filesystem::path(repro_path).filename().string();
  std::string kir = graph::print_graph(r.graph);
  std::string s;
  s += "// Generated by `kiln minify --emit cpp` from " + comment_text(name) + ": a standalone program against\n";
  s += "// libkiln that builds the minified graph, loads its inputs and runs it on backend " + comment_text(r.backend) +
       " beside the fp64\n";
  s += "// reference (a crash or hang in the backend is reported, not fatal). Exit 1 while it fails, 0 once fixed.\n";
  s += "// Build (from a kiln checkout built in build/):\n";
  s += "//   g++ -std=c++20 -O1 -I$KILN/src -I$KILN THIS.cpp $KILN/build/libkiln_minifier.a $KILN/build/libkiln_repro.a \\\n";
  s += "//       $KILN/build/libkiln.a \\\n";
  s += "//       " KILN_PROGRAM_LIBS " -o repro\n";
  s += "#include <cstdio>\n#include <filesystem>\n#include <string>\n\n";
  s += "#include \"core/options.h\"\n#include \"graph/inputs.h\"\n#include \"graph/text.h\"\n#include \"repro/reproduce.h\"\n";
  if (r.backend == kInjectTestBackend) s += "#include \"minifier/inject_backend.h\"\n";
  s += "\nstatic const char* kGraph = " + cpp_literal(kir) + ";\n\n";
  s += "int main(int argc, char** argv) {\n";
  s += "  try {\n";
  for (const auto& [k, v] : r.config) {
    s += fmt::format("    kiln::set_option(*kiln::find_option({}), {});  // recorded configuration\n",
                     nlohmann::json(k).dump(), nlohmann::json(v).dump());
  }
  if (r.backend == kInjectTestBackend) s += "    kiln::minify::register_inject_test_backend();\n";
  s += "    kiln::graph::Graph g = kiln::graph::parse_graph(kGraph, " + cpp_literal(name) + ");\n";
  s += "    std::filesystem::path here = std::filesystem::path(argv[0]).parent_path();\n";
  if (r.graph.inputs().empty()) {
    s += "    std::vector<kiln::Tensor> inputs;\n";
  } else {
    s += fmt::format("    std::string dir = argc > 1 ? argv[1] : (here / {}).string();  // or pass the input directory\n",
                     nlohmann::json(r.input_dir).dump());
    s += "    std::vector<kiln::Tensor> inputs = kiln::graph::load_inputs(g, dir);\n";
  }
  s += "    kiln::OracleOptions oracle;\n";
  s += fmt::format("    oracle.backend = {};\n    oracle.tolerance = {};\n", nlohmann::json(r.backend).dump(), r.tolerance);
  if (r.gradients) s += "    oracle.gradients = true;  // check: gradients (outputs, then the gradients)\n";
  s += "    kiln::FailureSignature f = kiln::FailureOracle(oracle).classify(g, inputs);\n";
  s += fmt::format("    std::printf(\"%s%s\\n\", std::string(kiln::failure_kind_name(f.kind)).c_str(), f.message.empty() ? \"\" : (\": \" + f.message).c_str());\n");
  s += fmt::format("    std::printf(\"recorded failure: %s\\n\", {});\n", cpp_literal(std::string(failure_kind_name(r.expected.kind))));
  s += "    return f.failed() ? 1 : 0;\n";
  s += "  } catch (const std::exception& e) {\n";
  s += "    std::fprintf(stderr, \"error: %s\\n\", e.what());\n    return 2;\n  }\n}\n";
  return s;
}

}  // namespace kiln::minify
