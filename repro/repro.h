// Repro files, format v1 and v2 (decision 8): one self-contained text file, a header of `key: value` lines followed
// by the graph in .kir text. It records the graph, how to make its inputs (a seed, or .npy files beside it with
// their content hashes), the non-default configuration, the backend and stage that fail, the kiln version, git
// hash, toolchain and device, the GPU (v3: `cuda-device` and `gpu`, for a CUDA backend or a graph of `@cuda` values),
// what is checked (v2: `check: gradients`, the outputs then the gradients of a training run, repro/training.h), and
// the expected failure signature. `kiln repro run FILE` re-checks it. A file is written in the oldest format that
// holds it (v1; v2 when it checks gradients; v3 when it records a GPU), so older kilns read every repro they can run
// and refuse the others as "written by a newer kiln" (readers refuse unknown keys, so a new key needs a version).
#pragma once
#include <map>
#include <memory>
#include <vector>
#include <optional>
#include <string>

#include "core/files.h"
#include "core/options.h"
#include "graph/graph.h"
#include "repro/failure.h"

namespace kiln {

inline constexpr int kReproFormatVersion = 3;       // the newest format this kiln reads
inline constexpr int kReproGradientsFormatVersion = 2;  // the first with `check: gradients`
inline constexpr int kReproGpuFormatVersion = 3;        // the first with `cuda-device` and `gpu`

struct ReproFile {
  int format_version = kReproFormatVersion;
  std::string kiln_version, git_hash, toolchain, device;  // device: the host ("cpu (N hardware threads)")
  // A repro of a CUDA backend or of a graph of CUDA values (format 3): the device it ran on ("cuda:0") and that
  // device's model ("NVIDIA H200 (sm_90)", or "none (<why>)" when the writer had no usable GPU). Empty: not recorded.
  std::string cuda_device, gpu;
  std::string backend = "eager";
  std::string stage;                          // the pipeline stage that fails (e.g. "inductor/codegen")
  std::map<std::string, std::string> config;  // non-default repro-settable options, by environment variable name
  std::optional<uint64_t> input_seed;         // inputs from graph::seeded_inputs(graph, seed)...
  std::string input_dir;                      // ...or .npy files in this directory (relative to the file)
  std::map<std::string, std::string> input_hashes;  // file name -> content hash (fnv1a64 hex)
  double tolerance = 1e-4;                    // the comparator tolerance used for accuracy failures
  bool gradients = false;                     // `check: gradients`: judged on outputs then gradients (training.h)
  FailureSignature expected;
  graph::Graph graph;
};

// A ReproFile for `g` on `backend` filled with this build's version, git hash, toolchain and device, and the GPU
// (record_gpu) when the backend is a CUDA one or `g` has CUDA values.
ReproFile make_repro(const graph::Graph& g, const std::string& backend = "eager");
// Whether a repro of `g` on `backend` runs on a GPU (backend inductor_cuda, or a value typed `@cuda`).
bool repro_uses_gpu(const graph::Graph& g, const std::string& backend);
// The model of the GPU kiln would run cuda:0 on here ("NVIDIA H200 (sm_90)"), or "none (<why>)".
std::string this_gpu();
// Sets r.cuda_device and r.gpu to this machine's when repro_uses_gpu(r.graph, r.backend), else clears them.
void record_gpu(ReproFile& r);
// For `kiln repro run`: a note when `r` records a GPU other than this machine's ("" when the same, or none recorded).
std::string gpu_mismatch_note(const ReproFile& r);
// Written as the oldest format that holds `r` (format_version is what a parsed file said, not what is printed).
std::string print_repro(const ReproFile& r);
ReproFile parse_repro(std::string_view text, const std::string& filename);
ReproFile load_repro(const std::string& path);
void save_repro(const ReproFile& r, const std::string& path);  // atomic

// "sha256:<hex>" of a file's content (a regular .npy file within kMaxNpyFileBytes).
std::string content_hash_of_file(const std::string& path);
// Whether the file's content has the recorded hash (sha256:..., or fnv1a64:... from older repros).
bool content_hash_matches(const std::string& path, const std::string& recorded);

// A repro's configuration applied for the lifetime of the object (every option back to what it was after).
// Only options whose row is ReproSettable::Yes are applied; parse_repro already refused others.
class AppliedReproConfig {
 public:
  explicit AppliedReproConfig(const ReproFile& r);
  ~AppliedReproConfig();
  AppliedReproConfig(const AppliedReproConfig&) = delete;
  AppliedReproConfig& operator=(const AppliedReproConfig&) = delete;

 private:
  std::vector<std::unique_ptr<ScopedOption>> applied_;
};

}  // namespace kiln
