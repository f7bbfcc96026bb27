// Channel logging to stderr, gated by KILN_LOGS: a comma list of channels, umbrellas (`capture`, `aot`,
// `inductor`: all of that stage's channels) or `all`, `-name` turning some off again. A disabled channel costs
// one load and compare: KILN_LOG formats its message only when the channel is on (or the trace records it).
//   KILN_LOGS=passes,fusion kiln run g.kir
//   KILN_LOGS=inductor,-output_code kiln run g.kir
#pragma once
#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace kiln {

enum class LogChannel : uint8_t {
  Graph,        // graphs as they enter and leave each stage (the inductor, each pass pipeline)
  Passes,       // which pass ran and whether it changed the graph
  OutputCode,   // generated code
  Fusion,       // fusion decisions and why a fusion was refused
  Bisect,       // every should_run() decision of the bisection hook
  Interpreter,  // each node the reference interpreter runs
  Cache,        // kernel cache hits, misses and evictions
  Lowering,     // inductor lowering decisions (realise or inline, fallbacks) and their reasons
  Localise,     // the inductor's schedule passes, one channel each (src/inductor/schedule_passes.h)
  Stream,
  Defer,
  MemoryPlan,
  GraphBreaks,  // capture: each graph break, its reason and the user's line
  Recompiles,   // capture: each recompile and its reason
  RecompilesVerbose,  // capture: each recompile with every failed guard of every cached trace
  Guards,       // capture: the guards of each new trace
  GraphCode,    // capture: each captured graph as .kir
  CaptureOps,   // capture: one line per recorded op
  Partitioner,  // aot: each save/recompute decision of the partitioners and its reason
  AotJointGraph,  // aot: each joint graph as .kir
  AotGraphs,      // aot: each forward and backward graph as .kir
  Autotune,       // cuda: max-autotune's candidates per kernel, their times and the choice
  NumChannels
};
inline constexpr int kNumLogChannels = int(LogChannel::NumChannels);

std::string_view log_channel_name(LogChannel c);
std::string_view log_channel_help(LogChannel c);
std::optional<LogChannel> find_log_channel(std::string_view name);
// The umbrella names KILN_LOGS takes besides the channels and `all` (capture, aot, inductor), and the channels
// each turns on.
const std::vector<std::string_view>& log_umbrellas();
std::vector<LogChannel> log_umbrella_channels(std::string_view umbrella);

// Whether KILN_LOGS enables `c` (re-read when the option is overridden).
bool log_enabled(LogChannel c);
// Whether KILN_LOGS enables a channel whose lines come from compiling (the channel table in log.cpp says which),
// which a compile served from a cache would not print.
bool compile_logs_enabled();
// Whether the channel's lines go into the structured trace (KILN_TRACE is on and the channel is one it records).
bool log_traced(LogChannel c);
// log_enabled or log_traced: whether a line is worth formatting.
bool log_wanted(LogChannel c);
// Writes "[kiln:<channel>] <line>\n" to stderr for each line of `message` (one write, so lines from threads do
// not interleave) when KILN_LOGS enables `c`, and records it as a "log" event when log_traced(c).
void log_line(LogChannel c, std::string_view message);

}  // namespace kiln

#define KILN_LOG(channel, ...)                                                        \
  do {                                                                                \
    if (::kiln::log_wanted(channel)) ::kiln::log_line(channel, fmt::format(__VA_ARGS__)); \
  } while (0)
