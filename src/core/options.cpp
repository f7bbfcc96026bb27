// The options table, its environment snapshot and overrides, value parsing, the unknown-variable warning,
// and the help/Markdown renderings of the table.
#include "core/options.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include <fmt/ranges.h>

#include "core/error.h"
#include "core/log.h"

extern char** environ;

namespace kiln {
namespace {

const std::vector<OptionSpec> kTable = {
    {Opt::Logs, "KILN_LOGS", OptType::List, "", "",
     "Log channels to print on stderr (comma list, or `all`); see the channel list below."},
    {Opt::DebugDir, "KILN_DEBUG_DIR", OptType::String, "", "",
     "Directory for debug dumps. When set, each pass pipeline writes its input graph and the graph after "
     "each pass as `<stage>/NN_<pass>.kir` there, and repro files are saved there."},
    {Opt::ReproAfter, "KILN_REPRO_AFTER", OptType::Choice, "", "capture,aot,backend",
     "Where to intercept a failing compilation for a repro: `capture` (the captured graph, before AOT), "
     "`aot` (the forward/backward graphs, before the inductor) or `backend` (the graph exactly as handed to a "
     "backend's compile, e.g. by `kiln run --backend`). Empty = off. Repros go to KILN_DEBUG_DIR "
     "(default ./kiln_debug); see docs/minifier.md."},
    {Opt::ReproLevel, "KILN_REPRO_LEVEL", OptType::Int, "2", "",
     "With KILN_REPRO_AFTER set: 1 = save a repro on a compile error; 2 = also minify it; 3 = also on "
     "runtime errors; 4 = also compare outputs against eager and minify accuracy failures."},
    {Opt::Inject, "KILN_INJECT", OptType::List, "", "",
     "Bugs to inject, as op:kind pairs (kinds: compile_error, runtime_error, crash, accuracy), e.g. "
     "`relu:accuracy`. Off when empty.", ReproSettable::Yes},
    {Opt::CacheDir, "KILN_CACHE_DIR", OptType::String, "", "",
     "Kernel cache directory. Empty = $XDG_CACHE_HOME/kiln (or ~/.cache/kiln)."},
    {Opt::CacheSizeLimit, "KILN_CACHE_SIZE_LIMIT", OptType::Int, "1G", "",
     "Size limit of the kernel cache in bytes (suffixes K, M, G); least recently used entries are evicted "
     "beyond it."},
    {Opt::StreamMinBytes, "KILN_STREAM_MIN_BYTES", OptType::Int, "0", "",
     "Compiled kernels write pointwise outputs at least this large (bytes; suffixes K, M, G) with streaming "
     "(non-temporal) stores. 0 = half the cache this process can count on (docs/inductor.md, Streaming stores).", ReproSettable::Yes},
    {Opt::Verify, "KILN_VERIFY", OptType::Bool, "auto", "",
     "Run the graph verifier between passes. `auto` = on in builds without NDEBUG.", ReproSettable::Yes},
    {Opt::Seed, "KILN_SEED", OptType::Int, "0", "",
     "Seed of the random generator used by tools: generated inputs of `kiln run` and the generator state "
     "random ops start from.", ReproSettable::Yes},
    {Opt::BisectLimit, "KILN_BISECT_LIMIT", OptType::List, "", "",
     "Bisection limits, as `stage:subsystem=N` or `stage=N` entries: only the first N applications of that "
     "subsystem (or of the whole stage) run; later ones are skipped (see docs/options.md, Bisection).", ReproSettable::Yes},
    {Opt::BisectDisable, "KILN_BISECT_DISABLE", OptType::List, "", "",
     "Subsystems to skip entirely, as `stage:subsystem` or `stage` entries (e.g. `passes:cse`).", ReproSettable::Yes},
};

struct State {
  std::mutex mutex;
  std::map<Opt, std::string> environment;  // snapshot of set variables
  std::map<Opt, std::string> overrides;
  bool loaded = false;
};

State& state() {
  static State s;
  return s;
}

std::atomic<uint64_t> g_generation{0};

std::vector<std::string> environ_entries() {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) out.emplace_back(*e);
  return out;
}

// The raw value of an option (override, environment or default); loads the environment on first use.
std::string raw_value(Opt id) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.loaded) {
    s.loaded = true;
    for (const OptionSpec& spec : kTable)
      if (const char* v = std::getenv(std::string(spec.env).c_str())) s.environment[spec.id] = v;
    for (const std::string& w : unknown_env_warnings(environ_entries())) std::fprintf(stderr, "kiln: warning: %s\n", w.c_str());
  }
  if (auto it = s.overrides.find(id); it != s.overrides.end()) return it->second;
  if (auto it = s.environment.find(id); it != s.environment.end()) return it->second;
  return std::string(option_spec(id).default_value);
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string_view::npos ? "" : std::string(s.substr(b, e - b + 1));
}

std::vector<std::string> split_words(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string_view::npos) comma = s.size();
    std::string w = trim(s.substr(start, comma - start));
    if (!w.empty()) out.push_back(w);
    start = comma + 1;
  }
  return out;
}

bool parse_bool(const OptionSpec& spec, const std::string& v) {
  std::string l = lower(trim(v));
  if (l == "1" || l == "on" || l == "true" || l == "yes") return true;
  if (l == "0" || l == "off" || l == "false" || l == "no" || l.empty()) return false;
#ifdef NDEBUG
  if (l == "auto") return false;
#else
  if (l == "auto") return true;
#endif
  fail("{}={}: expected a boolean (1/0, on/off, true/false, yes/no, auto)", spec.env, v);
}

int64_t parse_int(const OptionSpec& spec, const std::string& v) {
  const std::string t = trim(v);
  KILN_CHECK(!t.empty(), "{} is empty: expected an integer (optionally with a K, M or G suffix)", spec.env);
  std::optional<int64_t> n = parse_byte_count(t);
  KILN_CHECK(n, "{}={}: expected an integer (optionally with a K, M or G suffix)", spec.env, v);
  return *n;
}

void validate(const OptionSpec& spec, const std::string& v) {
  switch (spec.type) {
    case OptType::Bool: parse_bool(spec, v); break;
    case OptType::Int: parse_int(spec, v); break;
    case OptType::Choice: {
      std::string t = trim(v);
      if (t.empty()) break;
      std::vector<std::string> choices = split_words(spec.choices);
      KILN_CHECK(std::find(choices.begin(), choices.end(), t) != choices.end(), "{}={}: expected one of: {} (or empty)",
                 spec.env, v, spec.choices);
      break;
    }
    case OptType::String:
    case OptType::List: break;
  }
}

const OptionSpec& checked_spec(Opt id, std::initializer_list<OptType> types) {
  const OptionSpec& spec = option_spec(id);
  KILN_CHECK(std::find(types.begin(), types.end(), spec.type) != types.end(), "option {} is of type {}", spec.env,
             opt_type_name(spec.type));
  return spec;
}

}  // namespace

const std::vector<OptionSpec>& option_table() { return kTable; }

void load_options() { raw_value(Opt::Logs); }

const OptionSpec& option_spec(Opt id) {
  KILN_CHECK(int(id) < int(kTable.size()) && kTable[size_t(id)].id == id, "options: no row for option {}", int(id));
  return kTable[size_t(id)];
}

std::optional<Opt> find_option(std::string_view env_name) {
  for (const OptionSpec& spec : kTable)
    if (spec.env == env_name) return spec.id;
  return std::nullopt;
}

Opt repro_settable_option(std::string_view env_name) {
  std::optional<Opt> id = find_option(env_name);
  KILN_CHECK(id.has_value(), "unknown option {} (see `kiln --help-options`)", env_name);
  if (!option_spec(*id).repro_settable()) {
    std::vector<std::string_view> settable;
    for (const OptionSpec& spec : kTable)
      if (spec.repro_settable()) settable.push_back(spec.env);
    fail("a repro file may not set {}: repros set only options that change what is computed ({}), never paths, "
         "caches or anything that loads code; set it in your environment if you mean it", env_name,
         fmt::join(settable, ", "));
  }
  return *id;
}

std::string_view opt_type_name(OptType t) {
  switch (t) {
    case OptType::Bool: return "bool";
    case OptType::Int: return "int";
    case OptType::String: return "string";
    case OptType::Choice: return "choice";
    case OptType::List: return "list";
  }
  return "?";
}

bool opt_bool(Opt id) { return parse_bool(checked_spec(id, {OptType::Bool}), raw_value(id)); }
int64_t opt_int(Opt id) { return parse_int(checked_spec(id, {OptType::Int}), raw_value(id)); }

std::string opt_string(Opt id) {
  const OptionSpec& spec = checked_spec(id, {OptType::String, OptType::Choice});
  std::string v = raw_value(id);
  validate(spec, v);
  return spec.type == OptType::Choice ? trim(v) : v;
}

std::vector<std::string> opt_list(Opt id) {
  checked_spec(id, {OptType::List});
  return split_words(raw_value(id));
}

uint64_t options_generation() { return g_generation.load(std::memory_order_acquire); }

void set_option(Opt id, std::string value) {
  validate(option_spec(id), value);
  raw_value(id);  // loads the environment first, so its warnings are not attributed to later reads
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.overrides[id] = std::move(value);
  g_generation.fetch_add(1, std::memory_order_acq_rel);
}

void reset_option(Opt id) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.overrides.erase(id);
  g_generation.fetch_add(1, std::memory_order_acq_rel);
}

ScopedOption::ScopedOption(Opt id, std::string value) : id_(id) {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (auto it = s.overrides.find(id); it != s.overrides.end()) previous_ = it->second;
  }
  set_option(id, std::move(value));
}

ScopedOption::~ScopedOption() {
  if (previous_) set_option(id_, *previous_);
  else reset_option(id_);
}

int edit_distance(std::string_view a, std::string_view b) {
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = int(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = int(i);
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<std::string> unknown_env_warnings(const std::vector<std::string>& entries) {
  std::vector<std::string> out;
  for (const std::string& e : entries) {
    std::string name = e.substr(0, e.find('='));
    if (name.rfind("KILN_", 0) != 0 || find_option(name)) continue;
    std::string_view closest;
    int best = 1 << 30;
    for (const OptionSpec& spec : kTable)
      if (int d = edit_distance(name, spec.env); d < best) best = d, closest = spec.env;
    out.push_back(fmt::format("unknown environment variable {}; did you mean {}? (`kiln --help-options` lists "
                              "the options)", name, closest));
  }
  return out;
}

std::string options_help_text() {
  std::string out = "kiln options (environment variables; read once at startup):\n\n";
  for (const OptionSpec& spec : kTable) {
    out += fmt::format("  {:<22} {:<7} default: {}\n", spec.env, opt_type_name(spec.type),
                       spec.default_value.empty() ? "(empty)" : spec.default_value);
    if (!spec.choices.empty()) out += fmt::format("  {:<22} choices: {}\n", "", spec.choices);
    if (spec.repro_settable()) out += fmt::format("  {:<22} a repro file may set it\n", "");
    out += fmt::format("  {:<22} {}\n\n", "", spec.help);
  }
  out += "Log channels (KILN_LOGS=a,b or all):\n";
  for (int i = 0; i < kNumLogChannels; ++i)
    out += fmt::format("  {:<12} {}\n", log_channel_name(LogChannel(i)), log_channel_help(LogChannel(i)));
  return out;
}

std::string options_markdown() {
  std::string out =
      "# Options\n\n"
      "<!-- Generated from the options table in src/core/options.cpp by `kiln --help-options-md`;\n"
      "     tests/test_cli.cpp checks that this file is in sync. Edit the table, not this file. -->\n\n"
      "Every kiln setting is one row of one table. Values come from the environment, read once on first use;\n"
      "code (tests, the CLI) may override them. A `KILN_*` variable that is not in the table gets a warning\n"
      "naming the closest valid one.\n\n"
      "Types: `bool` takes 1/0, on/off, true/false, yes/no, or `auto` (on in builds without NDEBUG); `int`\n"
      "takes a decimal integer with an optional binary suffix K, M or G; `list` takes comma-separated words.\n\n"
      "Repro: whether a repro file's `config:` lines may set the option (docs/repro-format.md). Only options\n"
      "that change what is computed may; paths, caches and anything that loads code or writes files may not.\n\n"
      "| Variable | Type | Default | Repro | Meaning |\n|---|---|---|---|---|\n";
  for (const OptionSpec& spec : kTable) {
    std::string help(spec.help);
    if (!spec.choices.empty()) help += fmt::format(" Choices: {}.", spec.choices);
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", spec.env, opt_type_name(spec.type),
                       spec.default_value.empty() ? "(empty)" : fmt::format("`{}`", spec.default_value),
                       spec.repro_settable() ? "yes" : "no", help);
  }
  out += "\n## Log channels\n\n`KILN_LOGS=passes,fusion` (or `all`) prints these channels on stderr, one line "
         "per event, as `[kiln:<channel>] message`.\n\n| Channel | What it prints |\n|---|---|\n";
  for (int i = 0; i < kNumLogChannels; ++i)
    out += fmt::format("| `{}` | {} |\n", log_channel_name(LogChannel(i)), log_channel_help(LogChannel(i)));
  out +=
      "\n## Bisection\n\n"
      "Every pass application (and later every lowering, decomposition and fusion) asks one hook,\n"
      "`should_run(stage, subsystem, debug_info)` (src/core/bisect.h), before it acts. The hook counts the\n"
      "applications of each `stage:subsystem` (and of each stage) from 0 in the order they are asked and\n"
      "answers false when\n\n"
      "- `KILN_BISECT_DISABLE` names the subsystem (`passes:cse`) or its whole stage (`passes`), or\n"
      "- `KILN_BISECT_LIMIT` gives `stage:subsystem=N` (or `stage=N`) and this application's count is N or\n"
      "  more: only the first N applications run.\n\n"
      "A skipped application leaves a correct (possibly slower) program, so a bisector can binary-search N for\n"
      "the first application that makes a result wrong. The `bisect` log channel prints each decision with\n"
      "its count and the site's debug info. Stages and subsystems so far: `passes` with one subsystem per\n"
      "pass name (`dce`, `cse`, `constant_folding`).\n";
  return out;
}

std::optional<int64_t> parse_byte_count(std::string_view text) {
  std::string t(text);
  if (t.empty()) return std::nullopt;
  int64_t scale = 1;
  char last = char(std::toupper(static_cast<unsigned char>(t.back())));
  if (last == 'K' || last == 'M' || last == 'G') {
    scale = last == 'K' ? 1024 : last == 'M' ? 1024 * 1024 : 1024 * 1024 * 1024;
    t.pop_back();
  }
  size_t used = 0;
  int64_t n = 0;
  try {
    n = std::stoll(t, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != t.size() || used == 0) return std::nullopt;
  return n * scale;
}

}  // namespace kiln
