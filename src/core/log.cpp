// Channel logging: the channel names, the KILN_LOGS mask (cached, refreshed when options are overridden),
// and the stderr writer.
#include "core/log.h"

#include "core/escape.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

#include "core/error.h"
#include "core/options.h"

namespace kiln {
namespace {

// Whether a channel's lines come from compiling: a compile served from a cache prints none of them, so while
// one is on every compile must really happen (inductor/compile.cpp, must_compile_afresh).
enum class Output : bool { Anytime, FromCompiling };
struct ChannelRow {
  std::string_view name, help;
  Output output = Output::Anytime;
};
constexpr ChannelRow kChannels[kNumLogChannels] = {
    {"graph", "graphs as they enter and leave each stage: the inductor (input, decomposed, loop IR, scheduled) and each pass pipeline", Output::FromCompiling},
    {"passes", "which pass ran and whether it changed the graph", Output::FromCompiling},
    {"output_code", "generated code", Output::FromCompiling},
    {"fusion", "inductor pass fuse: fusion decisions, and why a fusion was refused", Output::FromCompiling},
    {"bisect", "every decision of the bisection hook should_run()", Output::FromCompiling},
    {"interpreter", "each node the reference interpreter runs"},
    {"cache", "kernel cache hits, misses and evictions"},
    {"lowering", "inductor lowering decisions: realise or inline, fallbacks to eager kernels, and why", Output::FromCompiling},
    {"localise", "inductor pass localise: which buffers become kernel-local scratch rows, and why not", Output::FromCompiling},
    {"stream", "inductor pass stream (CPU): which outputs get streaming stores, and why not", Output::FromCompiling},
    {"defer", "inductor pass defer (CPU): which last loops write their rows one row late, and why not", Output::FromCompiling},
    {"memory_plan", "inductor pass plan_memory: which buffers are freed after which step", Output::FromCompiling},
    {"graph_breaks", "capture: each graph break in a compiled function, its reason and the user's source line"},
    {"recompiles", "capture: each recompile of a compiled function and the guard failure that caused it"},
    {"recompiles_verbose", "capture: each recompile with the failed guard of every cached trace"},
    {"guards", "capture: the guards of each new trace of a compiled function"},
    {"graph_code", "capture: each captured graph as .kir"},
    {"capture", "capture: one line per recorded op (function, graph, op)"},
    {"partitioner", "aot: each save or recompute decision of the forward/backward partitioners, and why"},
    {"aot_joint_graph", "aot: each joint graph (forward and backward in one, primals and tangents in) as .kir"},
    {"aot_graphs", "aot: each partitioned forward and backward graph as .kir"},
    {"autotune", "cuda, mode max-autotune: each kernel's candidate launch shapes, their times, the choice and the tuning cache"},
};

// The mask and the options generation it was computed for (generation + 1, so 0 means "not computed").
std::atomic<uint32_t> g_mask{0};
std::atomic<uint64_t> g_mask_generation{0};

uint32_t compute_mask() {
  uint32_t mask = 0;
  for (const std::string& word : opt_list(Opt::Logs)) {
    if (word == "all") return (1u << kNumLogChannels) - 1;
    auto c = find_log_channel(word);
    if (c) {
      mask |= 1u << int(*c);
      continue;
    }
    std::string_view closest;
    int best = 1 << 30;
    for (const ChannelRow& row : kChannels)
      if (int d = edit_distance(word, row.name); d < best) best = d, closest = row.name;
    std::fprintf(stderr, "kiln: warning: KILN_LOGS names unknown log channel '%s'; did you mean '%s'? "
                         "(`kiln --help-options` lists the channels)\n", word.c_str(), std::string(closest).c_str());
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

void log_line(LogChannel c, std::string_view message) {
  // Messages quote users' names (values, graphs, files): terminal_safe, line breaks kept.
  std::string line = fmt::format("[kiln:{}] {}\n", log_channel_name(c), terminal_safe_lines(message));
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace kiln
