// Repro file printing and parsing. The header is line-oriented `key: value`; strings that may hold newlines
// (the failure message) are JSON-quoted. Everything after the header is the graph in .kir text.
#include "repro/repro.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/device_hooks.h"
#include "core/hash.h"
#include "core/options.h"
#include "core/seed.h"
#include "graph/text.h"
#include "kiln_version.h"

namespace kiln {

namespace {

// Feeds a repro input file (a regular file within kMaxNpyFileBytes) to `consume` in pieces.
template <class Consume>
void read_in_pieces(const std::string& path, Consume consume) {
  InputFile in(path, "repro input file", kMaxNpyFileBytes);
  std::vector<char> buf(size_t(1) << 20);
  while (int64_t n = in.read(buf.data(), int64_t(buf.size()))) consume(buf.data(), size_t(n));
}

// Input files of repros written before kiln hashed with SHA-256 record a 64-bit FNV-1a hash; still accepted.
std::string legacy_fnv1a64_of_file(const std::string& path) {
  uint64_t h = 0xcbf29ce484222325ull;
  read_in_pieces(path, [&](const char* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(p[i])) * 0x100000001b3ull;
  });
  return fmt::format("fnv1a64:{:016x}", h);
}

}  // namespace

std::string content_hash_of_file(const std::string& path) {
  Sha256 h;
  read_in_pieces(path, [&](const char* p, size_t n) { h.update(p, n); });
  return "sha256:" + to_hex(h.digest());
}

bool content_hash_matches(const std::string& path, const std::string& recorded) {
  if (recorded.rfind("fnv1a64:", 0) == 0) return legacy_fnv1a64_of_file(path) == recorded;
  return content_hash_of_file(path) == recorded;
}

AppliedReproConfig::AppliedReproConfig(const ReproFile& r) {
  for (const auto& [name, value] : r.config)
    applied_.push_back(std::make_unique<ScopedOption>(repro_settable_option(name), value));
}

AppliedReproConfig::~AppliedReproConfig() {
  while (!applied_.empty()) applied_.pop_back();  // restored in reverse order
}

bool repro_uses_gpu(const graph::Graph& g, const std::string& backend) {
  if (backend == "inductor_cuda") return true;
  for (int v = 0; v < g.num_values(); ++v)
    if (g.value(v).meta.device.type == DeviceType::CUDA) return true;
  return false;
}

std::string this_gpu() {
  try {
    return device_hooks(DeviceType::CUDA).describe(Device{DeviceType::CUDA, 0});
  } catch (const Error& e) {  // a build without the CUDA backend
    return fmt::format("none ({})", e.what());
  }
}

void record_gpu(ReproFile& r) {
  const bool gpu = repro_uses_gpu(r.graph, r.backend);
  r.cuda_device = gpu ? "cuda:0" : "";  // kiln runs CUDA programs on device 0's primary context (docs/cuda.md)
  r.gpu = gpu ? this_gpu() : "";
}

std::string gpu_mismatch_note(const ReproFile& r) {
  if (r.gpu.empty()) return "";
  const std::string here = this_gpu();
  if (here == r.gpu) return "";
  if (here.rfind("none", 0) == 0)
    return fmt::format("note: this repro was recorded on {} {}; this machine has no GPU kiln can use: {}",
                       r.cuda_device.empty() ? "cuda:0" : r.cuda_device, r.gpu, here);
  return fmt::format("note: this repro was recorded on {} {}; this machine's is {}: a failure that depends on the GPU "
                     "model may not show here", r.cuda_device.empty() ? "cuda:0" : r.cuda_device, r.gpu, here);
}

ReproFile make_repro(const graph::Graph& g, const std::string& backend) {
  ReproFile r;
  r.backend = backend;
  r.kiln_version = KILN_VERSION;
  r.git_hash = KILN_GIT_HASH;
#if defined(__clang__)
  r.toolchain = fmt::format("clang {}.{}.{}", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
  r.toolchain = fmt::format("gcc {}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#endif
  r.device = fmt::format("cpu ({} hardware threads)", std::max(1l, sysconf(_SC_NPROCESSORS_ONLN)));
  r.graph = g;
  record_gpu(r);
  return r;
}

std::string print_repro(const ReproFile& r) {
  std::string s = "# kiln repro file. Check whether the failure still happens: kiln repro run <this file>\n";
  const bool gpu = !r.cuda_device.empty() || !r.gpu.empty();
  s += fmt::format("kiln-repro: {}\n", gpu ? kReproGpuFormatVersion : r.gradients ? kReproGradientsFormatVersion : 1);
  s += fmt::format("kiln-version: {}\ngit: {}\ntoolchain: {}\ndevice: {}\n", r.kiln_version, r.git_hash, r.toolchain, r.device);
  if (!r.cuda_device.empty()) s += fmt::format("cuda-device: {}\n", r.cuda_device);
  if (!r.gpu.empty()) s += fmt::format("gpu: {}\n", r.gpu);
  s += fmt::format("backend: {}\n", r.backend);
  if (!r.stage.empty()) s += fmt::format("stage: {}\n", r.stage);
  for (const auto& [k, v] : r.config) {
    repro_settable_option(k);  // a writer records only what a reader accepts
    s += fmt::format("config: {}={}\n", k, v);
  }
  if (r.input_seed) s += fmt::format("inputs: seed {}\n", *r.input_seed);
  if (!r.input_dir.empty()) s += fmt::format("inputs: npy {}\n", nlohmann::json(r.input_dir).dump());
  for (const auto& [f, h] : r.input_hashes) s += fmt::format("input-hash: {} {}\n", nlohmann::json(f).dump(), h);
  s += fmt::format("tolerance: {}\n", r.tolerance);
  if (r.gradients) s += "check: gradients\n";
  s += fmt::format("failure: {}\n", r.expected.kind);
  s += fmt::format("message: {}\n\n", nlohmann::json(r.expected.message).dump());
  s += graph::print_graph(r.graph);
  return s;
}

namespace {

// Reads the header lines of one repro file into `r`; every error names the file and the line.
class HeaderReader {
 public:
  HeaderReader(ReproFile& r, const std::string& filename)
      : r_(r), filename_(filename), base_dir_(std::filesystem::path(filename).parent_path()) {}
  int line_no = 0;

  [[noreturn]] void err(const std::string& what) const { fail("{}:{}:1: {}", filename_, line_no, what); }

  void read(const std::string& key, const std::string& value) {
    // One line per key (config and input-hash: one per option and file): a second `backend:` would otherwise
    // win silently, and a reviewer reading the first would not see what runs.
    if (key != "config" && key != "input-hash") {
      auto [at, fresh] = key_lines_.emplace(key, line_no);
      if (!fresh) err(fmt::format("a second '{}' line (the first is line {}); a repro file gives each key once", key,
                                  at->second));
    }
    if (key == "kiln-repro") version(value);
    else if (key == "kiln-version") r_.kiln_version = value;
    else if (key == "git") r_.git_hash = value;
    else if (key == "toolchain") r_.toolchain = value;
    else if (key == "device") r_.device = value;
    else if (key == "cuda-device") gpu_field(r_.cuda_device, value);
    else if (key == "gpu") gpu_field(r_.gpu, value);
    else if (key == "backend") r_.backend = value;
    else if (key == "stage") r_.stage = value;
    else if (key == "config") config(value);
    else if (key == "inputs") inputs(value);
    else if (key == "input-hash") input_hash(value);
    else if (key == "tolerance") tolerance(value);
    else if (key == "check") check(value);
    else if (key == "failure") r_.expected.kind = rethrown_here([&] { return parse_failure_kind(value, "failure"); });
    else if (key == "message") r_.expected.message = json_string(value);
    else err("unknown header key '" + key + "'");
  }

 private:
  // `f()`, with a kiln::Error it throws reported at this line.
  template <class F>
  decltype(std::declval<F>()()) rethrown_here(F f) const {
    try {
      return f();
    } catch (const Error& e) {
      err(e.what());
    }
  }

  void version(const std::string& value) {
    std::optional<int> version = parse_number<int>(value);
    if (!version || *version < 1) err(fmt::format("invalid repro format version '{}' (expected a number such as 1)", value));
    r_.format_version = *version;
    KILN_CHECK(r_.format_version <= kReproFormatVersion, "{}:{}:1: this repro file has format version {}, written by a "
               "newer kiln; this kiln ({}) reads format {} and older: upgrade kiln to run it", filename_, line_no,
               r_.format_version, KILN_VERSION, kReproFormatVersion);
  }

  void config(const std::string& value) {
    size_t eq = value.find('=');
    if (eq == std::string::npos) err("config lines are NAME=VALUE, got '" + value + "'");
    rethrown_here([&] {  // validates the value
      ScopedOption check(repro_settable_option(value.substr(0, eq)), value.substr(eq + 1));
      return 0;
    });
    const std::string name = value.substr(0, eq);
    auto [at, fresh] = config_lines_.emplace(name, line_no);
    if (!fresh) err(fmt::format("a second 'config: {}=...' line (the first is line {}); set each option once", name,
                                at->second));
    r_.config[name] = value.substr(eq + 1);
  }

  void inputs(const std::string& value) {
    if (value.rfind("seed ", 0) == 0) {
      r_.input_seed = parse_seed(value.substr(5));
      if (!r_.input_seed) err(fmt::format("the input seed '{}' is not a number from 0 to 2^64-1", value.substr(5)));
    } else if (value.rfind("npy ", 0) == 0) {
      r_.input_dir = confined(json_string(value.substr(4)), "the input directory");
    } else {
      err("inputs are 'seed N' or 'npy \"DIR\"', got '" + value + "'");
    }
  }

  void input_hash(const std::string& value) {
    size_t sp = value.rfind(' ');
    if (sp == std::string::npos) err("input-hash lines are '\"FILE\" HASH'");
    const std::string file = confined(json_string(value.substr(0, sp)), "the input file");
    if (!r_.input_hashes.emplace(file, value.substr(sp + 1)).second)
      err(fmt::format("a second 'input-hash' line for {}; give each input file's hash once", file));
  }

  void check(const std::string& value) {
    if (value != "outputs" && value != "gradients")
      err(fmt::format("check is 'outputs' or 'gradients' (the outputs, then one gradient per input marked `grad`), "
                      "got '{}'", value));
    r_.gradients = value == "gradients";
    check_line_ = line_no;
  }

 public:
  // After the header: what one key says must fit what another says.
  void check_consistent() const {
    if (r_.gradients && r_.format_version < kReproGradientsFormatVersion)
      fail("{}:{}:1: 'check: gradients' needs repro format {} or newer, but the file says kiln-repro: {}", filename_,
           check_line_, kReproGradientsFormatVersion, r_.format_version);
    if (gpu_line_ > 0 && r_.format_version < kReproGpuFormatVersion)
      fail("{}:{}:1: 'cuda-device' and 'gpu' need repro format {} or newer, but the file says kiln-repro: {}", filename_,
           gpu_line_, kReproGpuFormatVersion, r_.format_version);
  }

 private:
  int check_line_ = 0;
  int gpu_line_ = 0;  // the first cuda-device or gpu line
  std::map<std::string, int> key_lines_, config_lines_;  // the line of each key (each config option) read

  void gpu_field(std::string& field, const std::string& value) {
    if (value.empty()) err("an empty value (expected e.g. 'cuda-device: cuda:0', 'gpu: NVIDIA H200 (sm_90)')");
    field = value;
    if (gpu_line_ == 0) gpu_line_ = line_no;
  }

  void tolerance(const std::string& value) {
    std::optional<double> tol = parse_number<double>(value);
    if (!tol || !(*tol >= 0) || std::isinf(*tol)) err(fmt::format("the tolerance '{}' is not a number >= 0", value));
    r_.tolerance = *tol;
  }

  // A path in the header, confined to the repro's directory (files.h).
  std::string confined(const std::string& path, std::string_view what) const {
    rethrown_here([&] { return confined_path(base_dir_, path, what); });
    return path;
  }

  std::string json_string(const std::string& v) const {
    try {
      auto j = nlohmann::json::parse(v);
      if (!j.is_string()) err("expected a JSON string, got " + v);
      return j.get<std::string>();
    } catch (const nlohmann::json::exception&) {
      err("expected a JSON string, got " + v);
    }
  }

  ReproFile& r_;
  const std::string& filename_;
  const std::filesystem::path base_dir_;
};

}  // namespace

ReproFile parse_repro(std::string_view text, const std::string& filename) {
  ReproFile r;
  r.format_version = 0;
  HeaderReader header(r, filename);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string line(text.substr(pos, end - pos));
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF line ends, as .kir text accepts them
    ++header.line_no;
    if (line.rfind("graph", 0) == 0) break;
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    size_t colon = line.find(": ");
    if (colon == std::string::npos) header.err("expected 'key: value' or the graph, got '" + line + "'");
    header.read(line.substr(0, colon), line.substr(colon + 2));
  }
  KILN_CHECK(r.format_version > 0, "{}: not a kiln repro file (no 'kiln-repro: N' line)", filename);
  header.check_consistent();
  KILN_CHECK(pos < text.size(), "{}: the repro file has no graph section", filename);
  // The graph keeps its line numbers: pad with the header's lines so locations point into this file.
  std::string graph_text(size_t(header.line_no - 1), '\n');
  graph_text += std::string(text.substr(pos));
  r.graph = graph::parse_graph(graph_text, filename);
  return r;
}

ReproFile load_repro(const std::string& path) { return parse_repro(read_input_file(path, "repro file"), path); }

void save_repro(const ReproFile& r, const std::string& path) { write_file_atomic(path, print_repro(r)); }

}  // namespace kiln
