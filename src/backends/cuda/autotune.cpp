// max-autotune: candidates, timing with CUDA events, the choice rule and the choices' cache (autotune.h).
#include "backends/cuda/autotune.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>

#include "backends/cuda/driver.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/log.h"
#include "inductor/kernel_disk_cache.h"

namespace kiln::cuda {

namespace {

std::string label_of(const LaunchChoice& c, const CudaKernel& code) {
  if (!code.rows) return fmt::format("block {}", code.block);
  if (code.persistent) {
    const int slots = c.persistent_slots > 0 ? c.persistent_slots : 16;
    return fmt::format("persistent rows, {} slots (block {})", slots, code.block);
  }
  if (!c.persistent) return fmt::format("rows, block {} (not persistent)", code.block);
  return fmt::format("rows, block {}{}", code.block, code.split ? fmt::format(" (split {} a row)", code.split) : "");
}

struct MemoryChoices {
  std::mutex mutex;
  std::map<std::string, std::string> by_key;  // SHA-256 of the key material -> label
  AutotuneStats stats;
};
MemoryChoices& memory() {
  static MemoryChoices m;
  return m;
}

const inductor::KernelDiskCache& disk_cache() {
  static const inductor::KernelDiskCache d(fmt::format("cuda-autotune-v{}", kAutotuneVersion), ".choice");
  return d;
}

// Milliseconds a launch of candidate `i` takes: the fastest of several timed batches (CUDA events around each), a
// batch long enough (about 0.2 ms) that the events' resolution does not matter.
double time_candidate(const Driver& d, const std::function<void(int)>& launch, int i) {
  CUevent start = nullptr, stop = nullptr;
  check(d.event_create(&start, CU_EVENT_DEFAULT), "cuEventCreate");
  check(d.event_create(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
  auto batch = [&](int reps) {
    check(d.event_record(start, nullptr), "cuEventRecord");
    for (int r = 0; r < reps; ++r) launch(i);
    check(d.event_record(stop, nullptr), "cuEventRecord");
    check(d.event_synchronize(stop), "cuEventSynchronize");
    float ms = 0;
    check(d.event_elapsed_time(&ms, start, stop), "cuEventElapsedTime");
    return double(ms) / reps;
  };
  double best = 0;
  try {
    const double estimate = batch(1);
    const int reps = int(std::clamp(0.2 / std::max(estimate, 1e-4), 1.0, 100.0));
    best = batch(reps);
    for (int t = 0; t < 4; ++t) best = std::min(best, batch(reps));
  } catch (...) {
    d.event_destroy(start);
    d.event_destroy(stop);
    throw;
  }
  d.event_destroy(start);
  d.event_destroy(stop);
  return best;
}

}  // namespace

std::vector<AutotuneCandidate> autotune_candidates(const inductor::Kernel& k, const inductor::LoweredGraph& lg,
                                                   const std::vector<int>& args, const CudaKernel& default_code) {
  std::vector<AutotuneCandidate> out;
  out.push_back({LaunchChoice{}, default_code, label_of(LaunchChoice{}, default_code)});
  if (default_code.work == 0) return out;
  std::vector<LaunchChoice> choices;
  if (!default_code.rows) {
    for (int b : {128, 512, 1024}) choices.push_back({.block = b});
  } else if (default_code.persistent) {
    for (int slots : {8, 32}) choices.push_back({.persistent_slots = slots});
    choices.push_back({.persistent = false});
  } else {
    for (int b : {default_code.block / 2, default_code.block * 2, default_code.block * 4})
      if (b >= 32 && b <= 1024) choices.push_back({.block = b});
  }
  for (const LaunchChoice& c : choices) {
    CudaKernel code = emit_kernel_cuda(k, lg, args, c);
    const bool duplicate = std::any_of(out.begin(), out.end(), [&](const AutotuneCandidate& o) {
      return o.code.source == code.source && o.code.block == code.block;
    });
    if (!duplicate) {
      std::string label = label_of(c, code);
      out.push_back({c, std::move(code), std::move(label)});
    }
  }
  return out;
}

std::string autotune_key_material(const std::vector<AutotuneCandidate>& candidates, const std::string& arch,
                                  const std::string& gpu) {
  std::string m = fmt::format("kiln cuda autotune v{}\narch {}\ngpu {}\nwork {}\n", kAutotuneVersion, arch, gpu,
                              candidates.front().code.work);
  for (const AutotuneCandidate& c : candidates)
    m += fmt::format("candidate {} | block {} | source {}\n", c.label, c.code.block, sha256_hex(c.code.source));
  return m;
}

std::string find_autotune_choice(const std::string& key_material, std::string* from) {
  const std::string key = sha256_hex(key_material);
  MemoryChoices& m = memory();
  {
    std::lock_guard lock(m.mutex);
    if (auto it = m.by_key.find(key); it != m.by_key.end()) {
      ++m.stats.memory_hits;
      if (from) *from = "memory cache";
      return it->second;
    }
  }
  std::optional<std::string> stored = disk_cache().find(key, key_material);
  if (!stored) return "";
  std::lock_guard lock(m.mutex);
  ++m.stats.disk_hits;
  m.by_key[key] = *stored;
  if (from) *from = "disk cache";
  return *stored;
}

void store_autotune_choice(const std::string& key_material, const std::string& label) {
  const std::string key = sha256_hex(key_material);
  {
    std::lock_guard lock(memory().mutex);
    memory().by_key[key] = label;
  }
  disk_cache().store(key, key_material, label, "a max-autotune choice");
}

AutotuneResult choose_candidate(const std::vector<AutotuneCandidate>& candidates, const std::vector<double>& ms) {
  AutotuneResult r;
  r.from = "measured";
  r.ms = ms;
  int fastest = 0;
  for (size_t i = 1; i < ms.size(); ++i)
    if (ms[i] >= 0 && ms[i] < ms[size_t(fastest)]) fastest = int(i);
  if (fastest == 0) {
    r.reason = "the default is the fastest";
  } else if (ms[size_t(fastest)] > ms[0] * (1 - kAutotuneMinGain)) {
    r.reason = fmt::format("the fastest, {} ({:.4f} ms), is within {:.0f}% of the default ({:.4f} ms): kept the default",
                           candidates[size_t(fastest)].label, ms[size_t(fastest)], kAutotuneMinGain * 100, ms[0]);
  } else {
    r.chosen = fastest;
    r.reason = fmt::format("the fastest, {:.2f}x the default's speed ({:.4f} ms against {:.4f} ms)",
                           ms[0] / ms[size_t(fastest)], ms[size_t(fastest)], ms[0]);
  }
  return r;
}

AutotuneResult autotune_kernel(const std::string& what, const std::vector<AutotuneCandidate>& candidates,
                               const std::string& key_material, const std::function<void(int)>& launch) {
  std::string from;
  const std::string cached = find_autotune_choice(key_material, &from);
  if (!cached.empty()) {
    for (size_t i = 0; i < candidates.size(); ++i)
      if (candidates[i].label == cached) {
        KILN_LOG(LogChannel::Autotune, "{}: {} from the {} (of {} candidates)", what, cached, from, candidates.size());
        AutotuneResult r;
        r.chosen = int(i);
        r.from = from;
        r.reason = "chosen by an earlier tuning with the same candidates on this GPU";
        return r;
      }
    KILN_LOG(LogChannel::Autotune, "{}: the {} names '{}', which is no candidate: tuning again", what, from, cached);
  }
  std::string why;
  const Driver* d = driver(&why);
  if (!d) fail("max-autotune: cannot time {}: {}", what, why);
  std::vector<double> ms(candidates.size(), -1);
  std::vector<std::string> failed(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    try {
      launch(int(i));  // loads the candidate; its first run is not timed
      check(d->ctx_synchronize(), "a max-autotune candidate's run (cuCtxSynchronize)");
      ms[i] = time_candidate(*d, launch, int(i));
    } catch (const Error& e) {
      if (i == 0) throw;  // the default is what the mode default launches: its failure is the program's
      failed[i] = e.what();
    }
  }
  AutotuneResult r = choose_candidate(candidates, ms);
  std::string lines;
  for (size_t i = 0; i < candidates.size(); ++i)
    lines += ms[i] >= 0 ? fmt::format("\n  {:<44} {:.4f} ms{}", candidates[i].label, ms[i], int(i) == r.chosen ? "  <- chosen" : "")
                        : fmt::format("\n  {:<44} could not run: {}", candidates[i].label, failed[i]);
  KILN_LOG(LogChannel::Autotune, "{} ({} {}): {} candidates timed on {}:{}\n  chosen: {}: {}", what,
           candidates[0].code.rows ? "rows kernel of" : "flat kernel of", candidates[0].code.work, candidates.size(),
           d->name, lines, candidates[size_t(r.chosen)].label, r.reason);
  store_autotune_choice(key_material, candidates[size_t(r.chosen)].label);
  {
    std::lock_guard lock(memory().mutex);
    ++memory().stats.measured;
  }
  return r;
}

AutotuneStats autotune_stats() {
  std::lock_guard lock(memory().mutex);
  return memory().stats;
}

void forget_memory_autotune_choices() {
  std::lock_guard lock(memory().mutex);
  memory().by_key.clear();
}

}  // namespace kiln::cuda
