// The compiled function's core (see compiled_function.h).
#include "capture/compiled_function.h"

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "capture/recorder.h"
#include "core/log.h"
#include "core/options.h"
#include "core/trace.h"
#include "inductor/compile_options.h"

namespace kiln::capture {

CompiledFunction::CompiledFunction(CaptureOptions options, SourceSite compiled_at)
    : options_(std::move(options)), compiled_at_(std::move(compiled_at)), frame_(new_compile_frame()) {
  label_ = fmt::format("{} ({})", options_.name.empty() ? "fn" : options_.name, compiled_at_.str());
  check_compile_mode(options_.mode, fmt::format("kiln::compile at {}: ", compiled_at_.str()));
  KILN_CHECK(options_.recompile_limit >= -1, "kiln::compile at {}: recompile_limit {} is negative", compiled_at_.str(),
             options_.recompile_limit);
  check_options();
  try {
    check_backend_setting();
  } catch (const Error& e) {
    fail("kiln::compile at {}: {}", compiled_at_.str(), e.what());
  }
  std::string backend = resolve_backend_name(options_.backend, bool(options_.custom_backend));
  if (!options_.custom_backend) backend_entry(backend);  // an unknown name is an error here, listing the names
  try {  // and so is a mode the backend's device has not
    if (options_.custom_backend) check_mode_on_device("a custom backend", "cpu", options_.mode);
    else check_backend_options(backend, CompileOptions{.mode = options_.mode});
  } catch (const Error& e) {
    fail("kiln::compile at {}: {}", compiled_at_.str(), e.what());
  }
}

int CompiledFunction::limit() const {
  return options_.recompile_limit >= 0 ? options_.recompile_limit : int(opt_int(Opt::RecompileLimit));
}

int CompiledFunction::recompiles() const {
  std::shared_lock lock(mutex_);
  return recompiles_;
}
int CompiledFunction::cache_entries() const {
  std::shared_lock lock(mutex_);
  return int(entries_.size());
}
bool CompiledFunction::fell_back() const {
  std::shared_lock lock(mutex_);
  return fell_back_;
}
std::vector<std::string> CompiledFunction::recompile_reasons() const {
  std::shared_lock lock(mutex_);
  return reasons_;
}

namespace {
// The compiled functions this thread is inside (tracing or replaying one, holding its lock). A call of one of
// them from its own eager region (a kiln::disable callable, directly or through another compiled function)
// would wait for the lock this thread holds: it runs eagerly instead.
thread_local std::vector<const CompiledFunction*> t_inside;
struct Inside {
  explicit Inside(const CompiledFunction* f) { t_inside.push_back(f); }
  ~Inside() { t_inside.pop_back(); }
  Inside(const Inside&) = delete;
  Inside& operator=(const Inside&) = delete;
};
bool is_inside(const CompiledFunction* f) { return std::find(t_inside.begin(), t_inside.end(), f) != t_inside.end(); }
}  // namespace

Flat CompiledFunction::call(const Flat& args, const std::function<void(Flat&)>& names_of, const EagerRun& run,
                            SourceSite called_at) {
  if (Recorder::current()) return run();  // called while another function is traced: part of that trace
  if (is_inside(this)) {
    KILN_LOG(LogChannel::GraphBreaks, "{} called at {} from inside its own call (a kiln::disable region): this "
             "inner call runs eagerly", label_, called_at.str());
    return run();
  }
  Inside inside(this);
  if (capture_verify_enabled()) return trace_and_cache(args, names_of, run, nullptr, "", called_at, 0);
  const std::string backend = resolve_backend_name(options_.backend, bool(options_.custom_backend));
  Lookup found;
  uint64_t seen;
  {
    std::shared_lock lock(mutex_);
    found = lookup(args, backend);
    if (found.hit) return std::move(found.outputs);
    seen = generation_;
  }
  log_guard_failures(found.failures);
  return trace_and_cache(args, names_of, run, found.passed, found.reason, called_at, seen);
}

// The cached entries newest first: the first whose guards pass and whose replay reaches its exit. Otherwise
// the entry whose guards passed (if any) and the reason of the miss. The caller holds the lock.
CompiledFunction::Lookup CompiledFunction::lookup(const Flat& args, const std::string& backend) const {
  Lookup found;
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (!(*it)->guards.check(args, backend)) continue;
    ReplayResult r = replay(**it, args);
    if (r.hit) {
      found.hit = true;
      found.outputs = std::move(r.outputs);
      return found;
    }
    if (!found.passed) found.passed = it->get(), found.reason = r.miss_reason;  // older entries may still hit
  }
  if (found.passed) return found;
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    std::string why;
    (*it)->guards.check(args, backend, &why);
    found.failures.push_back(fmt::format("{}: {}", (*it)->id, why));
    if (found.reason.empty()) found.reason = why;
  }
  return found;
}


// The verbose list of guard failures (one per cached trace, newest first), for KILN_LOGS=recompiles_verbose.
void CompiledFunction::log_guard_failures(const std::vector<std::string>& failures) const {
  if (!failures.empty()) trace_event_for(next_compile_id(), "guard_failure", {{"function", label_}, {"failures", failures}});
  if (!log_wanted(LogChannel::RecompilesVerbose) || failures.empty()) return;
  std::string out;
  for (const std::string& f : failures) out += "\n    - " + f;
  log_line(LogChannel::RecompilesVerbose,
           fmt::format("recompiling {}\n    triggered by the following guard failure(s):{}", label_, out));
}

// Whether this miss may re-trace: false past the recompile limit (warned once; an error when asked for).
// Counts and logs the recompile. The caller holds the lock.
bool CompiledFunction::admit_recompile(const std::string& reason, const SourceSite& called_at) {
  if (fell_back_) return false;
  if (recompiles_ >= limit()) {
    std::string message = fmt::format(
        "{} hit the recompile limit ({})\n    function: {}\n    last reason: {}\n    it runs eagerly on calls "
        "that miss its cache from now on (raise CaptureOptions::recompile_limit or KILN_RECOMPILE_LIMIT)",
        options_.name.empty() ? "fn" : options_.name, limit(), label_, reason);
    trace_event("recompile_limit", {{"function", label_}, {"reason", reason}, {"site", called_at.str()},
                                    {"limit", limit()}});
    if (options_.error_on_recompile_limit) fail("{} (error_on_recompile_limit)", message);
    fell_back_ = true;
    std::fprintf(stderr, "kiln: warning: %s\n", message.c_str());
    return false;
  }
  ++recompiles_;
  reasons_.push_back(reason);
  KILN_LOG(LogChannel::Recompiles, "recompiling {} because: {} (called at {})", label_, reason, called_at.str());
  trace_event_for(next_compile_id(), "recompile", {{"function", label_}, {"reason", reason}, {"site", called_at.str()},
                                                  {"recompiles", recompiles_}, {"limit", limit()}});
  return true;
}

// Runs the function eagerly with the recorder on: its results are this call's results.
CompiledFunction::Traced CompiledFunction::record(const Flat& args, const std::function<void(Flat&)>& names_of,
                                                  const EagerRun& run, const std::string& backend) const {
  TraceSpan span("capture", "trace");
  Traced t;
  std::vector<std::string> leaf_names, length_names;
  Flat named;
  named.leaf_names = &leaf_names;
  named.length_names = &length_names;
  names_of(named);
  {
    Recorder recorder(args, leaf_names, RecordOptions{options_.fullgraph, label_, !options_.custom_backend && backend_supports_autograd(backend)});
    t.outputs = run();
    t.trace = recorder.finish(t.outputs);
  }
  t.guards = std::make_unique<GuardSet>(GuardSet::of_call(args, leaf_names, length_names, backend));
  if (trace_enabled()) trace_event("guards", {{"function", label_}, {"guards", t.guards->describe()}});
  if (log_enabled(LogChannel::Guards))
    log_line(LogChannel::Guards, fmt::format("guards of {} (trace {}):\n    {}", label_, next_entry_id_,
                                             fmt::join(t.guards->describe(), "\n    ")));
  return t;
}

Flat CompiledFunction::trace_and_cache(const Flat& args, const std::function<void(Flat&)>& names_of,
                                       const EagerRun& run, CacheEntry* extend, const std::string& reason,
                                       const SourceSite& called_at, uint64_t seen_generation) {
  const bool verify = capture_verify_enabled();
  const std::string backend = resolve_backend_name(options_.backend, bool(options_.custom_backend));
  std::unique_lock lock(mutex_);
  if (!verify && !entries_.empty()) {
    if (seen_generation != generation_) {
      // Another thread changed the cache while this one waited for the lock: it may hold this call's trace.
      Lookup again = lookup(args, backend);
      if (again.hit) return std::move(again.outputs);
      extend = again.passed;
    }
    if (!admit_recompile(reason, called_at)) {
      lock.unlock();
      return run();
    }
  }
  // One compile of the trace (core/trace.h): frame = this function, recompile = how many traces it made before.
  CompileScope traced("function", label_, called_at.str(), next_compile_id());
  ++traces_;
  try {
    Traced t = record(args, names_of, run, backend);
    if (verify && !extend)
      for (auto it = entries_.rbegin(); it != entries_.rend() && !extend; ++it)
        if ((*it)->guards.check(args, backend)) extend = it->get();
    add_trace(t, extend, Compiler{{backend, options_.custom_backend, options_.suppress_errors, options_.mode}, label_},
              called_at);
    return std::move(t.outputs);
  } catch (const std::exception& e) {
    traced.fail("error", e.what());
    throw;
  }
}

// Adds a trace to the cache: into `extend` (the entry whose guards the call passed) as a new branch, or as
// an entry of its own; a trace that contradicts `extend` replaces it, with a warning naming the difference.
void CompiledFunction::add_trace(Traced& t, CacheEntry* extend, const Compiler& compiler,
                                 const SourceSite& called_at) {
  ++generation_;
  bool still_cached = false;
  for (const auto& e : entries_) still_cached |= e.get() == extend;
  if (extend && still_cached) {
    MergeOutcome merged = merge_trace(*extend, t.trace, compiler);
    if (merged.kind == MergeOutcome::Kind::Merged) return;
    if (merged.kind == MergeOutcome::Kind::Differs) {
      std::fprintf(stderr,
                   "kiln: warning: %s%s called at %s: this call's trace differs from the cached trace for the same "
                   "guards: %s. The function depends on something kiln does not guard (a global, a captured "
                   "reference, a number read elsewhere): pass it as an argument. The cached trace is replaced.\n",
                   capture_verify_enabled() ? "KILN_CAPTURE_VERIFY: " : "", label_.c_str(), called_at.str().c_str(),
                   merged.difference.c_str());
      for (auto& e : entries_)
        if (e.get() == extend) e = make_entry(std::move(t.trace), std::move(*t.guards), compiler, extend->id);
      return;
    }
  }
  entries_.push_back(make_entry(std::move(t.trace), std::move(*t.guards), compiler, next_entry_id_++));
}

}  // namespace kiln::capture
