// Channel logging: the channel names, the KILN_LOGS mask (cached, refreshed when options are overridden),
// and the stderr writer.
#include "core/log.h"

#include "core/escape.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/options.h"
#include "core/trace.h"

namespace kiln {
namespace {

// Whether a channel's lines come from compiling: a compile served from a cache prints none of them, so while
// one is on every compile must really happen (inductor/compile.cpp, must_compile_afresh).
enum class Output : bool { Anytime, FromCompiling };
// The umbrella a channel belongs to (KILN_LOGS=inductor turns on all of the inductor's, as TORCH_LOGS=inductor
// does); "" for the channels every stage writes to (graph, passes, bisect, interpreter).
struct ChannelRow {
  std::string_view name, help;
  Output output = Output::Anytime;
  std::string_view umbrella = "";
  // Whether the channel's lines also go into the structured trace (KILN_TRACE) when it is on, whatever KILN_LOGS
  // says: every channel but those whose text the trace records as artifacts (graphs, code) and the per-op and
  // per-decision channels whose volume would dwarf the rest (interpreter, capture_ops, bisect).
  bool traced = true;
};
constexpr Output C = Output::FromCompiling;
constexpr ChannelRow kChannels[kNumLogChannels] = {
    {"graph", "graphs as they enter and leave each stage: the inductor (input, decomposed, loop IR, scheduled) and each pass pipeline", C, "", false},
    {"passes", "which pass ran and whether it changed the graph", C},
    {"output_code", "generated code", C, "inductor", false},
    {"fusion", "inductor pass fuse: fusion decisions, and why a fusion was refused", C, "inductor"},
    {"bisect", "every decision of the bisection hook should_run()", C, "", false},
    {"interpreter", "each node the reference interpreter runs", Output::Anytime, "", false},
    {"cache", "kernel cache hits, misses and evictions", Output::Anytime, "inductor"},
    {"lowering", "inductor lowering decisions: realise or inline, fallbacks to eager kernels, and why", C, "inductor"},
    {"localise", "inductor pass localise: which buffers become kernel-local scratch rows, and why not", C, "inductor"},
    {"stream", "inductor pass stream (CPU): which outputs get streaming stores, and why not", C, "inductor"},
    {"defer", "inductor pass defer (CPU): which last loops write their rows one row late, and why not", C, "inductor"},
    {"memory_plan", "inductor pass plan_memory: which buffers are freed after which step", C, "inductor"},
    {"graph_breaks", "capture: each graph break in a compiled function, its reason and the user's source line", Output::Anytime, "capture"},
    {"recompiles", "capture: each recompile of a compiled function and the guard failure that caused it", Output::Anytime, "capture"},
    {"recompiles_verbose", "capture: each recompile with the failed guard of every cached trace", Output::Anytime, "capture"},
    {"guards", "capture: the guards of each new trace of a compiled function", Output::Anytime, "capture"},
    {"graph_code", "capture: each captured graph as .kir", Output::Anytime, "capture", false},
    {"capture_ops", "capture: one line per recorded op (function, graph, op)", Output::Anytime, "capture", false},
    {"partitioner", "aot: each save or recompute decision of the forward/backward partitioners, and why", Output::Anytime, "aot"},
    {"aot_joint_graph", "aot: each joint graph (forward and backward in one, primals and tangents in) as .kir", Output::Anytime, "aot", false},
    {"aot_graphs", "aot: each partitioned forward and backward graph as .kir", Output::Anytime, "aot", false},
    {"autotune", "cuda, mode max-autotune: each kernel's candidate launch shapes, their times, the choice and the tuning cache", Output::Anytime, "inductor"},
};
constexpr std::string_view kUmbrellas[] = {"capture", "aot", "inductor"};

// The channels `word` names (a channel, an umbrella or `all`); 0 when none.
uint32_t channels_named(std::string_view word) {
  if (word == "all") return (1u << kNumLogChannels) - 1;
  if (auto c = find_log_channel(word)) return 1u << int(*c);
  uint32_t mask = 0;
  for (int i = 0; i < kNumLogChannels; ++i)
    if (!kChannels[i].umbrella.empty() && kChannels[i].umbrella == word) mask |= 1u << i;
  return mask;
}

// The mask and the options generation it was computed for (generation + 1, so 0 means "not computed").
std::atomic<uint32_t> g_mask{0};
std::atomic<uint64_t> g_mask_generation{0};

// KILN_LOGS's entries in order: a channel, an umbrella or `all` turns its channels on (`+name` as `name`:
// TORCH_LOGS's `+` asks for more detail, and kiln's channels have one level); `-name` turns them off again
// (KILN_LOGS=inductor,-output_code). An unknown name is warned about with the closest valid one.
uint32_t compute_mask() {
  uint32_t mask = 0;
  for (const std::string& entry : opt_list(Opt::Logs)) {
    const bool off = entry.front() == '-';
    const std::string word = off || entry.front() == '+' ? entry.substr(1) : entry;
    if (uint32_t named = channels_named(word)) {
      mask = off ? mask & ~named : mask | named;
      continue;
    }
    std::string_view closest;
    int best = 1 << 30;
    auto consider = [&](std::string_view name) {
      if (int d = edit_distance(word, name); d < best) best = d, closest = name;
    };
    for (const ChannelRow& row : kChannels) consider(row.name);
    for (std::string_view umbrella : kUmbrellas) consider(umbrella);
    std::fprintf(stderr, "kiln: warning: KILN_LOGS names unknown log channel '%s'; did you mean '%s'? "
                         "(`kiln --help-options` lists the channels)\n", terminal_safe(word).c_str(),
                 std::string(closest).c_str());
  }
  return mask;
}

}  // namespace

std::string_view log_channel_name(LogChannel c) { return kChannels[int(c)].name; }

bool compile_logs_enabled() {
  for (int i = 0; i < kNumLogChannels; ++i)
    if (kChannels[i].output == Output::FromCompiling && log_enabled(LogChannel(i))) return true;
  return false;
}
std::string_view log_channel_help(LogChannel c) { return kChannels[int(c)].help; }

std::optional<LogChannel> find_log_channel(std::string_view name) {
  for (int i = 0; i < kNumLogChannels; ++i)
    if (kChannels[i].name == name) return LogChannel(i);
  return std::nullopt;
}

bool log_enabled(LogChannel c) {
  uint64_t want = options_generation() + 1;
  if (g_mask_generation.load(std::memory_order_acquire) != want) {
    static std::mutex m;
    std::lock_guard<std::mutex> lock(m);
    if (g_mask_generation.load(std::memory_order_relaxed) != want) {
      g_mask.store(compute_mask(), std::memory_order_relaxed);
      g_mask_generation.store(want, std::memory_order_release);
    }
  }
  return (g_mask.load(std::memory_order_relaxed) >> int(c)) & 1u;
}

const std::vector<std::string_view>& log_umbrellas() {
  static const std::vector<std::string_view> names(std::begin(kUmbrellas), std::end(kUmbrellas));
  return names;
}

std::vector<LogChannel> log_umbrella_channels(std::string_view umbrella) {
  std::vector<LogChannel> out;
  for (int i = 0; i < kNumLogChannels; ++i)
    if (kChannels[i].umbrella == umbrella && !umbrella.empty()) out.push_back(LogChannel(i));
  return out;
}

bool log_traced(LogChannel c) { return kChannels[int(c)].traced && trace_enabled(); }

bool log_wanted(LogChannel c) { return log_enabled(c) || log_traced(c); }

void log_line(LogChannel c, std::string_view message) {
  if (log_traced(c)) trace_event("log", {{"channel", log_channel_name(c)}, {"message", message}});
  if (!log_enabled(c)) return;
  // Messages quote users' names (values, graphs, files): terminal_safe, line breaks kept. Every line of a
  // multi-line event (a graph, generated code) carries the prefix, so `grep '\[kiln:fusion\]'` keeps all of it.
  const std::string prefix = fmt::format("[kiln:{}] ", log_channel_name(c));
  const std::string text = terminal_safe_lines(message);
  std::string out;
  out.reserve(text.size() + prefix.size() * 2);
  size_t start = 0;
  do {
    const size_t end = text.find('\n', start);
    out += prefix;
    out.append(text, start, end == std::string::npos ? std::string::npos : end - start);
    out += '\n';
    start = end == std::string::npos ? std::string::npos : end + 1;
  } while (start != std::string::npos && start < text.size());
  std::fwrite(out.data(), 1, out.size(), stderr);  // one write, so lines from threads do not interleave
}

}  // namespace kiln
