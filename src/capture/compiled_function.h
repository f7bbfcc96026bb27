// The type-erased core of a compiled function (kiln::compile's result holds one, shared by its copies):
// the cache entries (one per guard set, each a trace tree), the call path (guards -> replay -> re-trace on a
// miss), recompile reasons and the recompile limit with its eager fall-back, fullgraph, KILN_CAPTURE_VERIFY,
// and the logs. Thread-safe: replays share the cache under a reader lock; traces are added under a writer lock.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "capture/backend.h"
#include "capture/pytree.h"
#include "capture/site.h"
#include "capture/trace_tree.h"
#include "core/trace.h"

namespace kiln {

struct CaptureOptions {
  // A backend registry name (eager, inductor; later aot_eager, aot_eager_decomp_partition). Empty:
  // KILN_BACKEND, else inductor.
  std::string backend{};
  // A user's backend (takes precedence over `backend`): a captured graph and example inputs -> a program.
  capture::CustomBackend custom_backend{};
  bool fullgraph = false;   // the first graph break is an error (its reason and the user's line)
  // "default"; "reduce-overhead": each captured graph replays as a CUDA graph; "max-autotune": each kernel's launch
  // shape is chosen by timing at its first run. Both need backend inductor_cuda (docs/cuda.md). Checked at
  // kiln::compile.
  std::string mode = "default";
  int recompile_limit = -1;      // -1: KILN_RECOMPILE_LIMIT (8)
  bool error_on_recompile_limit = false;  // past the limit, raise instead of running eagerly
  bool suppress_errors = false;  // a graph whose backend compile fails warns and runs eagerly
  std::string name{};            // for messages; default "fn"
  std::vector<std::string> arg_names{};  // argument names for guard messages; default arg0, arg1, ...
};

namespace capture {

// The user's function on this call's arguments: runs it and flattens the result.
using EagerRun = std::function<Flat()>;

class CompiledFunction {
 public:
  CompiledFunction(CaptureOptions options, SourceSite compiled_at);
  // The call: `args` flattened; `names_of` fills leaf and length names (only when tracing).
  Flat call(const Flat& args, const std::function<void(Flat&)>& names_of, const EagerRun& run, SourceSite called_at);
  // "fn (file:line)": how messages name the function.
  const std::string& label() const { return label_; }
  int recompiles() const;
  int cache_entries() const;
  bool fell_back() const;
  std::vector<std::string> recompile_reasons() const;

 private:
  Flat trace_and_cache(const Flat& args, const std::function<void(Flat&)>& names_of, const EagerRun& run,
                       CacheEntry* extend, const std::string& reason, const SourceSite& called_at,
                       uint64_t seen_generation);
  struct Traced {
    Flat outputs;
    Trace trace;
    std::unique_ptr<GuardSet> guards;
  };
  bool admit_recompile(const std::string& reason, const SourceSite& called_at);
  Traced record(const Flat& args, const std::function<void(Flat&)>& names_of, const EagerRun& run,
                const std::string& backend) const;
  void add_trace(Traced& t, CacheEntry* extend, const Compiler& compiler, const SourceSite& called_at);
  struct Lookup {
    bool hit = false;
    Flat outputs;
    CacheEntry* passed = nullptr;
    std::string reason;
    std::vector<std::string> failures;
  };
  Lookup lookup(const Flat& args, const std::string& backend) const;
  void log_guard_failures(const std::vector<std::string>& failures) const;
  int limit() const;
  // The compile id the next trace of this function gets (core/trace.h): its guard failure and recompile events
  // belong to it.
  CompileId next_compile_id() const { return CompileId{frame_, traces_.load()}; }

  CaptureOptions options_;
  SourceSite compiled_at_;
  std::string label_;
  int frame_ = 0;    // the trace's compile id frame (core/trace.h)
  std::atomic<int> traces_{0};  // traces recorded so far: the next compile id's recompile number (read unlocked)
  mutable std::shared_mutex mutex_;
  std::vector<std::unique_ptr<CacheEntry>> entries_;
  int next_entry_id_ = 0;
  int recompiles_ = 0;
  uint64_t generation_ = 0;  // changes whenever a trace is added
  bool fell_back_ = false;
  std::vector<std::string> reasons_;
};

}  // namespace capture
}  // namespace kiln
