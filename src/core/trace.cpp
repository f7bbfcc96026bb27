// The structured compile trace, compile ids and compile-time profiling (trace.h).
#include "core/trace.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/build_id.h"
#include "core/error.h"
#include "core/escape.h"
#include "core/files.h"
#include "core/options.h"
#include "kiln_version.h"

namespace kiln {

std::string CompileId::str() const { return valid() ? fmt::format("{}/{}", frame, recompile) : "-"; }

namespace {

using Json = nlohmann::json;

std::atomic<int> g_next_frame{0};
thread_local CompileId t_compile_id;

int64_t cpu_time_us() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return int64_t(t.tv_sec) * 1000000 + t.tv_nsec / 1000;
}

Json to_json(const TraceValue& v) {
  struct Visit {
    Json operator()(int64_t x) const { return x; }
    Json operator()(double x) const { return x; }
    Json operator()(bool x) const { return x; }
    Json operator()(const std::string& x) const { return utf8_lossless(x); }
    Json operator()(const std::vector<std::string>& xs) const {
      Json a = Json::array();
      for (const std::string& x : xs) a.push_back(utf8_lossless(x));
      return a;
    }
  };
  return std::visit(Visit{}, v);
}

// The JSON-lines file of this process: opened at the first event after KILN_TRACE names a directory (again when
// it names another), one O_APPEND write per event.
class TraceFile {
 public:
  bool wanted() {
    refresh();
    return active_.load(std::memory_order_acquire);
  }
  void write(const Json& event) {
    std::lock_guard lock(mutex_);
    refresh_locked();
    if (dir_.empty()) return;
    if (fd_ >= 0 && owner_pid_ != ::getpid()) {  // a forked child (an isolated candidate): a file of its own
      ::close(fd_);
      fd_ = -1;
    }
    if (fd_ < 0 && !open_locked()) return;
    std::string line = event.dump(-1, ' ', false, Json::error_handler_t::replace);
    line += '\n';
    const char* p = line.data();
    size_t left = line.size();
    while (left > 0) {
      const ssize_t n = ::write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        warn_once(fmt::format("KILN_TRACE: cannot write {} ({}); the trace stops here", path_, std::strerror(errno)));
        ::close(fd_);
        fd_ = -1;
        give_up_locked();
        return;
      }
      p += n;
      left -= size_t(n);
    }
  }
  bool runtime() {
    refresh();
    return runtime_.load(std::memory_order_acquire);
  }

 private:
  void refresh() {
    if (generation_.load(std::memory_order_acquire) == options_generation() + 1) return;
    std::lock_guard lock(mutex_);
    refresh_locked();
  }
  void refresh_locked() {
    const uint64_t now = options_generation() + 1;
    if (generation_.load(std::memory_order_relaxed) == now) return;
    std::string dir = opt_string(Opt::Trace);
    if (dir != dir_) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = -1;
      dir_ = dir == failed_dir_ ? "" : dir;
    }
    active_.store(!dir_.empty(), std::memory_order_release);
    runtime_.store(!dir_.empty() && opt_bool(Opt::TraceRuntime), std::memory_order_release);
    generation_.store(now, std::memory_order_release);
  }
  // A directory kiln cannot write to: no trace (one warning), until KILN_TRACE names another.
  void give_up_locked() {
    failed_dir_ = dir_;
    dir_.clear();
    active_.store(false, std::memory_order_release);
    runtime_.store(false, std::memory_order_release);
  }
  bool open_locked() {
    try {
      create_output_directory(dir_);
    } catch (const Error& e) {
      warn_once(fmt::format("KILN_TRACE: {}; no trace is written", e.what()));
      give_up_locked();
      return false;
    }
    for (int n = 0; n < 10000; ++n) {
      path_ = fmt::format("{}/kiln-{}-{}.jsonl", dir_, ::getpid(), n);
      fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
      if (fd_ >= 0) break;
      if (errno != EEXIST) break;
    }
    if (fd_ < 0) {
      warn_once(fmt::format("KILN_TRACE: cannot create a trace file in {} ({}); no trace is written",
                            dir_, std::strerror(errno)));
      give_up_locked();
      return false;
    }
    owner_pid_ = ::getpid();
    write_header_locked();
    return true;
  }
  void write_header_locked() {
    Json config = Json::object();
    for (const OptionInEffect& o : options_in_effect())
      if (o.set) config[o.env] = utf8_lossless(o.value);
    Json argv = Json::array();
    for (const std::string& w : process_argv()) argv.push_back(utf8_lossless(w));
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    Json header = {
        {"event", "process"},
        {"schema", kTraceSchemaVersion},
        {"ts_us", trace_clock_us()},
        {"pid", int64_t(::getpid())},
        {"unix_ms", int64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch()).count())},
        {"version", KILN_VERSION},
        {"git", KILN_GIT_HASH},
        {"build", utf8_lossless(build_identity())},
        {"host", utf8_lossless(host)},
        {"argv", argv},
        {"config", config},
    };
    const std::string line = header.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
    if (::write(fd_, line.data(), line.size()) != ssize_t(line.size()))
      warn_once(fmt::format("KILN_TRACE: cannot write {} ({})", path_, std::strerror(errno)));
  }
  void warn_once(const std::string& message) {
    if (warned_) return;
    warned_ = true;
    std::fprintf(stderr, "kiln: warning: %s\n", terminal_safe(message).c_str());
  }

  std::mutex mutex_;
  std::atomic<uint64_t> generation_{0};
  std::string dir_, failed_dir_, path_;
  int fd_ = -1;
  pid_t owner_pid_ = 0;  // the process that opened fd_
  std::atomic<bool> active_{false}, runtime_{false};  // read without the lock by every trace point
  bool warned_ = false;
};

TraceFile& trace_file() {
  static TraceFile* file = new TraceFile;  // never destroyed: events may come from atexit handlers
  return *file;
}

struct Listeners {
  std::mutex mutex;
  std::map<int, TraceListener> by_handle;
  int next = 0;
  std::atomic<int> count{0};
};
Listeners& listeners() {
  static Listeners* l = new Listeners;
  return *l;
}

struct TimesTable {
  std::mutex mutex;
  std::vector<CompileTimeRow> rows;
  std::map<std::tuple<int, int, std::string, std::string>, size_t> index;
};
TimesTable& times_table() {
  static TimesTable* t = new TimesTable;
  return *t;
}

void record_time(const CompileId& id, std::string_view category, std::string_view name, double wall_ms, double cpu_ms) {
  TimesTable& t = times_table();
  std::lock_guard lock(t.mutex);
  auto key = std::make_tuple(id.frame, id.recompile, std::string(category), std::string(name));
  auto it = t.index.find(key);
  if (it == t.index.end()) {
    it = t.index.emplace(std::move(key), t.rows.size()).first;
    t.rows.push_back(CompileTimeRow{id, std::string(category), std::string(name)});
  }
  CompileTimeRow& row = t.rows[it->second];
  ++row.calls;
  row.wall_ms += wall_ms;
  row.cpu_ms += cpu_ms;
}

void emit(TraceEvent event) {
  const bool to_file = trace_file().wanted();
  if (to_file) {
    Json j = Json::object();
    j["event"] = event.name;
    j["ts_us"] = trace_clock_us();
    j["tid"] = int64_t(::gettid());
    if (event.compile_id.valid()) j["compile_id"] = event.compile_id.str();
    for (const TraceField& f : event.fields) j[f.key] = to_json(f.value);
    trace_file().write(j);
  }
  Listeners& l = listeners();
  if (l.count.load(std::memory_order_acquire) == 0) return;
  std::lock_guard lock(l.mutex);
  for (const auto& [handle, listener] : l.by_handle) listener(event);
}

}  // namespace

int new_compile_frame() { return g_next_frame.fetch_add(1); }
CompileId current_compile_id() { return t_compile_id; }

std::string TraceEvent::text(std::string_view key) const {
  for (const TraceField& f : fields)
    if (f.key == key)
      if (const std::string* s = std::get_if<std::string>(&f.value)) return *s;
  return "";
}

int64_t trace_clock_us() {
  static const auto start = std::chrono::steady_clock::now();
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
}

bool trace_enabled() { return listeners().count.load(std::memory_order_acquire) > 0 || trace_file().wanted(); }
bool trace_runtime_enabled() { return trace_file().runtime(); }

void trace_event(std::string_view name, std::vector<TraceField> fields) {
  if (!trace_enabled()) return;
  emit(TraceEvent{std::string(name), t_compile_id, std::move(fields)});
}

void trace_event_for(const CompileId& id, std::string_view name, std::vector<TraceField> fields) {
  if (!trace_enabled()) return;
  emit(TraceEvent{std::string(name), id, std::move(fields)});
}

void trace_artifact(std::string_view name, std::string_view kind, const std::function<std::string()>& text) {
  if (!trace_enabled()) return;
  trace_event("artifact", {{"name", name}, {"kind", kind}, {"text", text()}});
}

int add_trace_listener(TraceListener listener) {
  Listeners& l = listeners();
  std::lock_guard lock(l.mutex);
  const int handle = l.next++;
  l.by_handle.emplace(handle, std::move(listener));
  l.count.store(int(l.by_handle.size()), std::memory_order_release);
  return handle;
}

void remove_trace_listener(int handle) {
  Listeners& l = listeners();
  std::lock_guard lock(l.mutex);
  l.by_handle.erase(handle);
  l.count.store(int(l.by_handle.size()), std::memory_order_release);
}

// ---------------------------------------------------------------- compiles and spans

CompileScope::CompileScope(std::string_view what, std::string_view name, std::string_view site, CompileId id)
    : previous_(t_compile_id), name_(name) {
  outermost_ = !previous_.valid() || id.valid();
  if (id.valid()) id_ = id;
  else if (previous_.valid()) id_ = previous_;
  else id_ = CompileId{new_compile_frame(), 0};
  t_compile_id = id_;
  start_us_ = trace_clock_us();
  if (outermost_ && trace_enabled()) {
    std::vector<TraceField> fields{{"what", what}, {"name", name}};
    if (!site.empty()) fields.emplace_back("site", site);
    trace_event("compile_start", std::move(fields));
  }
}

CompileScope::~CompileScope() {
  if (outermost_) {
    const double ms = double(trace_clock_us() - start_us_) / 1000.0;
    record_time(id_, "compile", name_, ms, 0);
    if (trace_enabled())
      trace_event("compile_end", {{"name", name_}, {"outcome", failed_ ? "error" : "ok"}, {"wall_ms", ms}});
  }
  t_compile_id = previous_;
}

void CompileScope::fail(std::string_view kind, std::string_view message) {
  if (failed_) return;
  failed_ = true;
  // An error passes through every scope of its compile on its way out: the innermost, which knows its stage,
  // records it.
  thread_local CompileId recorded_id;
  thread_local std::string recorded_message;
  if (recorded_id == id_ && recorded_message == message) return;
  recorded_id = id_;
  recorded_message = std::string(message);
  trace_event("compile_error", {{"kind", kind}, {"message", message}});
}

TraceSpan::TraceSpan(std::string_view category, std::string_view name)
    : category_(category), name_(name), start_us_(trace_clock_us()), start_cpu_us_(cpu_time_us()) {}

TraceSpan::~TraceSpan() {
  const int64_t end = trace_clock_us();
  const double wall_ms = double(end - start_us_) / 1000.0, cpu_ms = double(cpu_time_us() - start_cpu_us_) / 1000.0;
  record_time(t_compile_id, category_, name_, wall_ms, cpu_ms);
  if (trace_enabled())
    trace_event("span", {{"category", category_}, {"name", name_}, {"start_us", start_us_}, {"wall_ms", wall_ms},
                         {"cpu_ms", cpu_ms}});
}

// ---------------------------------------------------------------- compile_times()

CompileTimes compile_times() {
  TimesTable& t = times_table();
  std::lock_guard lock(t.mutex);
  return CompileTimes{t.rows};
}

void reset_compile_times() {
  TimesTable& t = times_table();
  std::lock_guard lock(t.mutex);
  t.rows.clear();
  t.index.clear();
}

std::vector<CompileTimeRow> CompileTimes::of(const CompileId& id) const {
  std::vector<CompileTimeRow> out;
  for (const CompileTimeRow& r : rows)
    if (r.compile_id == id) out.push_back(r);
  return out;
}

double CompileTimes::total_wall_ms(std::string_view category, std::string_view name) const {
  double ms = 0;
  for (const CompileTimeRow& r : rows)
    if (r.category == category && r.name == name) ms += r.wall_ms;
  return ms;
}

std::string CompileTimes::str() const {
  struct Total {
    std::string category, name;
    int calls = 0, compiles = 0;
    double wall = 0, cpu = 0;
  };
  std::vector<Total> totals;
  std::map<std::pair<std::string, std::string>, size_t> at;
  for (const CompileTimeRow& r : rows) {
    auto key = std::make_pair(r.category, r.name);
    auto it = at.find(key);
    if (it == at.end()) {
      it = at.emplace(key, totals.size()).first;
      totals.push_back(Total{r.category, r.name});
    }
    Total& t = totals[it->second];
    t.calls += r.calls;
    ++t.compiles;
    t.wall += r.wall_ms;
    t.cpu += r.cpu_ms;
  }
  std::stable_sort(totals.begin(), totals.end(), [](const Total& a, const Total& b) { return a.wall > b.wall; });
  std::string out = fmt::format("{:<10} {:<28} {:>7} {:>9} {:>11} {:>10}\n", "category", "stage or pass", "calls",
                                "compiles", "wall ms", "cpu ms");
  for (const Total& t : totals)
    out += fmt::format("{:<10} {:<28} {:>7} {:>9} {:>11.2f} {:>10.2f}\n", terminal_safe(t.category),
                       terminal_safe(t.name), t.calls, t.compiles, t.wall, t.cpu);
  return out;
}

// ---------------------------------------------------------------- CompileProfiler

struct CompileProfiler::State {
  std::mutex mutex;
  std::vector<Function> functions;
  Function& of(const std::string& name) {
    for (Function& f : functions)
      if (f.name == name) return f;
    Function f;
    f.name = name;
    functions.push_back(std::move(f));
    return functions.back();
  }
};

CompileProfiler::CompileProfiler() : state_(std::make_shared<State>()) {
  std::weak_ptr<State> weak = state_;
  handle_ = add_trace_listener([weak](const TraceEvent& e) {
    std::shared_ptr<State> s = weak.lock();
    if (!s) return;
    const std::string function = e.text("function");
    if (function.empty()) return;
    std::lock_guard lock(s->mutex);
    Function& f = s->of(function);
    if (e.name == "graph_compiled") ++f.compiles;
    else if (e.name == "graph_break") {
      ++f.graph_breaks;
      f.break_reasons.push_back(e.text("reason"));
    } else if (e.name == "guard_failure") ++f.guard_failures;
    else if (e.name == "recompile") {
      ++f.recompiles;
      f.recompile_reasons.push_back(e.text("reason"));
    }
  });
}

CompileProfiler::~CompileProfiler() { remove_trace_listener(handle_); }

std::vector<CompileProfiler::Function> CompileProfiler::functions() const {
  std::lock_guard lock(state_->mutex);
  return state_->functions;
}

std::string CompileProfiler::report() const {
  const std::vector<Function> fs = functions();
  if (fs.empty()) return "CompileProfiler: nothing was compiled\n";
  std::string out = fmt::format("{:<48} {:>8} {:>12} {:>14} {:>10}\n", "function", "graphs", "graph breaks",
                                "guard failures", "recompiles");
  for (const Function& f : fs)
    out += fmt::format("{:<48} {:>8} {:>12} {:>14} {:>10}\n", terminal_safe(f.name), f.compiles, f.graph_breaks,
                       f.guard_failures, f.recompiles);
  for (const Function& f : fs) {
    for (const std::string& r : f.break_reasons) out += fmt::format("  {}: graph break: {}\n", terminal_safe(f.name), terminal_safe(r));
    for (const std::string& r : f.recompile_reasons) out += fmt::format("  {}: recompiled: {}\n", terminal_safe(f.name), terminal_safe(r));
  }
  return out;
}

}  // namespace kiln
