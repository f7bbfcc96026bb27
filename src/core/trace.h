// The structured compile trace (KILN_TRACE=DIR; docs/observability.md), compile ids, and compile-time profiling,
// in one place. Every compile the process runs is numbered `frame/recompile` as PyTorch numbers them: a function
// kiln::compile captured gets a frame of its own and counts its re-traces; a graph compiled directly (kiln::compile
// of a graph, the tools) is a new frame, recompile 0; a compile inside another (AOT's forward and backward halves,
// the inductor under AOT) keeps the outer id. Events are what happened in a compile (its stages and passes with
// their wall and CPU times, each stage's graph, guards, breaks, recompiles, cache lookups, kernels and the graph
// nodes they came from, errors); with KILN_TRACE set each is one JSON line of DIR/kiln-<pid>-<n>.jsonl, written as
// it happens (one write per line, O_APPEND), so a killed process leaves every event up to the kill. The file's
// first line describes the process: schema version, kiln's version, build id, command line, every KILN_* in effect.
// The stage and pass times also feed compile_times(), whether or not a trace is written.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace kiln {

// The schema of the JSON lines (trace/schema.cpp checks them; docs/observability.md lists every event).
inline constexpr int kTraceSchemaVersion = 1;

struct CompileId {
  int frame = -1;
  int recompile = 0;
  bool valid() const { return frame >= 0; }
  std::string str() const;  // "3/1"; "-" when not valid
  bool operator==(const CompileId&) const = default;
};

// A new frame number (process-wide, from 0).
int new_compile_frame();

// The compile the calling thread is in (invalid outside one).
CompileId current_compile_id();

// One field of an event: an integer, a number, a flag, a text, or a list of texts.
using TraceValue = std::variant<int64_t, double, bool, std::string, std::vector<std::string>>;
struct TraceField {
  std::string key;
  TraceValue value;
  TraceField(std::string k, int v) : key(std::move(k)), value(int64_t(v)) {}
  TraceField(std::string k, int64_t v) : key(std::move(k)), value(v) {}
  TraceField(std::string k, size_t v) : key(std::move(k)), value(int64_t(v)) {}
  TraceField(std::string k, double v) : key(std::move(k)), value(v) {}
  TraceField(std::string k, bool v) : key(std::move(k)), value(v) {}
  TraceField(std::string k, std::string v) : key(std::move(k)), value(std::move(v)) {}
  TraceField(std::string k, std::string_view v) : key(std::move(k)), value(std::string(v)) {}
  TraceField(std::string k, const char* v) : key(std::move(k)), value(std::string(v)) {}
  TraceField(std::string k, std::vector<std::string> v) : key(std::move(k)), value(std::move(v)) {}
};

// An event as a listener sees it.
struct TraceEvent {
  std::string name;
  CompileId compile_id;
  std::vector<TraceField> fields;
  // The text of field `key` ("" when absent or not a text).
  std::string text(std::string_view key) const;
};

// Whether events are recorded: KILN_TRACE is set, or a listener (CompileProfiler) is installed. Call sites build
// costly fields only when it is true.
bool trace_enabled();
// Whether KILN_TRACE_RUNTIME asks for runtime events (each compiled call, each kernel launch) too.
bool trace_runtime_enabled();
// Records one event of the current compile (a no-op when trace_enabled() is false). Its fields are built by the
// caller first: a site that runs per kernel or per launch asks trace_enabled() before building them.
void trace_event(std::string_view name, std::vector<TraceField> fields);
// The same for the compile `id` (a runtime event of a program that compile made).
void trace_event_for(const CompileId& id, std::string_view name, std::vector<TraceField> fields);
// Records a text artifact of the current compile (a stage's graph, the loop IR, generated code): `text` is
// computed only when tracing.
void trace_artifact(std::string_view name, std::string_view kind, const std::function<std::string()>& text);

// Receives every event while installed (from any thread; calls are serialised).
using TraceListener = std::function<void(const TraceEvent&)>;
int add_trace_listener(TraceListener listener);
void remove_trace_listener(int handle);

// One compile: opens it on construction (a new frame unless `id` is given, or the outer compile's id when the
// thread is already in one) and closes it on destruction, with its outcome and wall time ("compile_start" /
// "compile_end"). `what` is "graph" or "function"; `name` the graph's or function's name; `site` the user's line
// where known. fail() marks the outcome an error with its message (call it where the error is caught).
class CompileScope {
 public:
  CompileScope(std::string_view what, std::string_view name, std::string_view site = {}, CompileId id = {});
  ~CompileScope();
  CompileScope(const CompileScope&) = delete;
  CompileScope& operator=(const CompileScope&) = delete;
  void fail(std::string_view kind, std::string_view message);
  const CompileId& id() const { return id_; }
  bool outermost() const { return outermost_; }

 private:
  CompileId id_, previous_;
  bool outermost_ = false;
  bool failed_ = false;
  int64_t start_us_ = 0;
  std::string name_;
};

// A timed stage or pass of the current compile: its wall and CPU time go to compile_times() and, when tracing, to
// a "span" event (`category`: capture, aot, inductor, codegen, ...).
class TraceSpan {
 public:
  TraceSpan(std::string_view category, std::string_view name);
  ~TraceSpan();
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  std::string category_, name_;
  int64_t start_us_ = 0, start_cpu_us_ = 0;
};

// Microseconds since this process's trace clock started (the events' `ts_us`).
int64_t trace_clock_us();

// Where compile time went, per compile id and stage or pass: kiln::compile_times() (as PyTorch's
// torch._dynamo.utils.compile_times()). Stages nest (a pass inside the inductor inside AOT); each row is its own
// span's time, the outer rows include the inner ones.
struct CompileTimeRow {
  CompileId compile_id;
  std::string category, name;
  int calls = 0;
  double wall_ms = 0, cpu_ms = 0;
};
struct CompileTimes {
  std::vector<CompileTimeRow> rows;  // in the order each (compile id, category, name) first ran
  // Per (category, name) over every compile id: a table as PyTorch prints it, slowest first.
  std::string str() const;
  // The rows of one compile id.
  std::vector<CompileTimeRow> of(const CompileId& id) const;
  double total_wall_ms(std::string_view category, std::string_view name) const;
};
CompileTimes compile_times();
void reset_compile_times();

// Counts, per compiled function, its compiles, graph breaks and guard failures while it lives (the seeds'
// "Excessive Recompilation" recipe; PyTorch's CompileProfiler): construct one, run the code, print report().
// It listens to the compile events of the whole process, whatever the backend.
class CompileProfiler {
 public:
  CompileProfiler();
  ~CompileProfiler();
  CompileProfiler(const CompileProfiler&) = delete;
  CompileProfiler& operator=(const CompileProfiler&) = delete;
  struct Function {
    std::string name;  // "fn (file:line)"
    int compiles = 0, graph_breaks = 0, guard_failures = 0, recompiles = 0;
    std::vector<std::string> break_reasons, recompile_reasons;
  };
  std::vector<Function> functions() const;  // in the order each first compiled
  std::string report() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
  int handle_ = -1;
};

}  // namespace kiln
