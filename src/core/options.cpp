// The options table, its environment snapshot and overrides, value parsing, the unknown-variable warning,
// and the help/Markdown renderings of the table.
#include "core/options.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include <fmt/ranges.h>

#include "core/bisect.h"
#include "core/error.h"
#include "core/inject.h"
#include "core/log.h"
#include "core/seed.h"

extern char** environ;

namespace kiln {
namespace {

// Entry checks of the List options (OptionSpec::check_entry). Whether a named stage, subsystem or log
// channel exists is decided where they are defined; these check the form.
bool is_name(std::string_view w) {
  return !w.empty() && std::all_of(w.begin(), w.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
         });
}

// "stage" or "stage:subsystem": "" when well formed.
std::string site_problem(std::string_view site) {
  size_t colon = site.find(':');
  if (colon == std::string_view::npos) return is_name(site) ? "" : fmt::format("'{}' is not a stage name", site);
  if (!is_name(site.substr(0, colon))) return fmt::format("'{}' is not a stage name", site.substr(0, colon));
  if (!is_name(site.substr(colon + 1)))
    return fmt::format("'{}' is not a subsystem name", site.substr(colon + 1));
  return "";
}

std::string bisect_disable_entry(std::string_view e) { return site_problem(e); }

std::string bisect_limit_entry(std::string_view e) {
  size_t eq = e.rfind('=');
  if (eq == std::string_view::npos) return "no '=N'";
  if (std::string p = site_problem(e.substr(0, eq)); !p.empty()) return p;
  std::string_view n = e.substr(eq + 1);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), v);
  if (n.empty() || ec != std::errc() || end != n.data() + n.size() || v < 0)
    return fmt::format("N = '{}' is not a non-negative integer", n);
  return "";
}

// Rows give the validity fields (range, entry form and check) only where they say something; the others keep
// the struct's defaults.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
const std::vector<OptionSpec> kTable = {
    {Opt::Logs, "KILN_LOGS", OptType::List, "", "",
     "Log channels to print on stderr (comma list of channels and umbrellas, or `all`; `-name` turns one off); see the channel list below."},
    {Opt::DebugDir, "KILN_DEBUG_DIR", OptType::String, "", "",
     "Directory for debug dumps. When set, every compile, training compile, pass pipeline and captured graph "
     "writes its graphs (and the inductor its schedules and kernels) to a directory of its own there, "
     "`<stage>/NNN_<graph>/` (never reused, so nothing is overwritten), listed in `index.tsv` with the graph, "
     "the process id and the command line; repro files are saved there too."},
    {Opt::Trace, "KILN_TRACE", OptType::String, "", "",
     "Directory for the structured compile trace: each process writes one JSON-lines file there, "
     "`kiln-<pid>-<n>.jsonl`, as it compiles (every compile id, stage, pass, graph, guard, break, recompile, "
     "cache lookup, kernel and error, with the configuration and the command line); `kiln trace report DIR` "
     "draws it as one HTML page and a Chrome/Perfetto trace (docs/observability.md). Empty = off."},
    {Opt::TraceRuntime, "KILN_TRACE_RUNTIME", OptType::Bool, "0", "",
     "With KILN_TRACE set: also record each call of a compiled program and each kernel it launches, with their "
     "times (docs/observability.md)."},
    {Opt::ReproAfter, "KILN_REPRO_AFTER", OptType::Choice, "", "capture,aot,backend",
     "Where to intercept a failing compilation for a repro: `capture` (the captured graph, before AOT), "
     "`aot` (the forward/backward graphs, before the inductor) or `backend` (the graph exactly as handed to a "
     "backend's compile, e.g. by `kiln run --backend`). Empty = off. Repros go to KILN_DEBUG_DIR "
     "(default ./kiln_debug); see docs/minifier.md."},
    {Opt::ReproLevel, "KILN_REPRO_LEVEL", OptType::Int, "2", "",
     "With KILN_REPRO_AFTER set: 1 = save a repro on a compile error; 2 = also minify it; 3 = also on "
     "runtime errors; 4 = also compare outputs against eager and minify accuracy failures.",
     ReproSettable::No, 1, 4},
    {Opt::Inject, "KILN_INJECT", OptType::List, "", "",
     "Bugs to inject, as op:kind pairs, e.g. `relu:accuracy` (`fusion:accuracy` and `<op>:decomposition` for "
     "the inductor, docs/inductor.md; `<op>:vjp` and `partition:accuracy` (the min-cut partitioner recomputes a value wrongly) for AOT autograd, docs/aot.md; `hang` only in the inject_test backend, "
     "docs/minifier.md). Off when empty.",
     ReproSettable::Yes, 0, INT64_MAX, inject_entry_form(), inject_entry_problem},  // core/inject.h
    {Opt::CacheDir, "KILN_CACHE_DIR", OptType::String, "", "",
     "Kernel cache directory. Empty = $XDG_CACHE_HOME/kiln, else ~/.cache/kiln (never a shared path); used only "
     "when no other user can write it or a directory above it (docs/inductor.md, Kernel cache trust)."},
    {Opt::CacheSizeLimit, "KILN_CACHE_SIZE_LIMIT", OptType::Bytes, "1G", "",
     "Size limit of the kernel cache in bytes (suffixes K, M, G); least recently used entries are evicted "
     "beyond it."},
    {Opt::StreamMinBytes, "KILN_STREAM_MIN_BYTES", OptType::Bytes, "0", "",
     "Compiled kernels write pointwise outputs at least this large (bytes; suffixes K, M, G) with streaming "
     "(non-temporal) stores. 0 = half the cache this process can count on (docs/inductor.md, Streaming stores).",
     ReproSettable::Yes},
    {Opt::Verify, "KILN_VERIFY", OptType::Bool, "auto", "",
     "Run the graph verifier and the inductor's loop-IR verifier between passes. `auto` = on in builds without "
     "NDEBUG.", ReproSettable::Yes},
    // An Int whose values are those of parse_seed (core/seed.h), 0 to 2^64-1 like every --seed flag: the
    // validity checks below ask seed_problem for this row, and opt_seed() reads it.
    {Opt::Seed, "KILN_SEED", OptType::Int, "0", "",
     "Seed of the random generator used by tools: generated inputs of `kiln run` and the generator state "
     "random ops start from.",
     ReproSettable::Yes, 0, INT64_MAX},
    {Opt::BisectLimit, "KILN_BISECT_LIMIT", OptType::List, "", "",
     "Bisection limits, as `stage:subsystem=N` or `stage=N` entries: only the first N applications of that "
     "subsystem (or of the whole stage) run; later ones are skipped (see docs/options.md, Bisection).",
     ReproSettable::Yes, 0, INT64_MAX, "stage:subsystem=N or stage=N (N >= 0)", bisect_limit_entry},
    {Opt::BisectDisable, "KILN_BISECT_DISABLE", OptType::List, "", "",
     "Subsystems to skip entirely, as `stage:subsystem` or `stage` entries (e.g. `passes:cse`).",
     ReproSettable::Yes, 0, INT64_MAX, "stage:subsystem or stage", bisect_disable_entry},
    {Opt::Backend, "KILN_BACKEND", OptType::String, "", "",
     "Backend of functions compiled with kiln::compile that name none (a backend registry name: eager, "
     "inductor, ...). Empty = inductor. Lets a user ablate backends without rebuilding (docs/capture.md)."},
    {Opt::CaptureVerify, "KILN_CAPTURE_VERIFY", OptType::Bool, "0", "",
     "Re-trace every call of a kiln::compile'd function and warn about the first difference from the cached "
     "trace: a dependency kiln did not guard (a global, a captured reference). Calls run eagerly (docs/capture.md)."},
    {Opt::RecompileLimit, "KILN_RECOMPILE_LIMIT", OptType::Int, "8", "",
     "Recompiles of one kiln::compile'd function before kiln warns and runs it eagerly on calls that miss "
     "its cache (Dynamo's cache_size_limit).",
     ReproSettable::No, 0, 1000000},
    {Opt::OwnExp, "KILN_OWN_EXP", OptType::Bool, "1", "",
     "Compiled CPU kernels compute f32 e^x with kiln's own AVX-512 polynomial where the host has AVX-512F/VL "
     "(docs/inductor.md, Debugging). 0 = libm's expf (glibc's libmvec variants once vectorised).",
     ReproSettable::Yes},
    {Opt::VectorWidth, "KILN_VECTOR_WIDTH", OptType::Int, "0", "",
     "Lanes the loop vectoriser gives each loop of a compiled CPU kernel: 0 = its own choice, 1 = scalar code "
     "(loop and SLP vectorisation off), N = N lanes (docs/inductor.md, Debugging).",
     ReproSettable::Yes, 0, 64},
};
#pragma GCC diagnostic pop

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

// A Bool value, or nothing when `v` is not one.
std::optional<bool> bool_value(std::string_view v) {
  std::string l = lower(trim(v));
  if (l == "1" || l == "on" || l == "true" || l == "yes") return true;
  if (l == "0" || l == "off" || l == "false" || l == "no" || l.empty()) return false;
#ifdef NDEBUG
  if (l == "auto") return false;
#else
  if (l == "auto") return true;
#endif
  return std::nullopt;
}

// An Int or Bytes value: `value` when valid; else `problem` says what is wrong ("" when `v` is simply not
// an integer: the expectation says it all).
struct IntValue {
  std::optional<int64_t> value;
  std::string problem;
};

IntValue int_value(const OptionSpec& spec, std::string_view v) {
  const std::string t = trim(v);
  if (t.empty()) return {std::nullopt, "empty"};
  int64_t n = 0;
  if (spec.type == OptType::Bytes) {
    std::optional<int64_t> bytes = parse_byte_count(t);
    if (!bytes) {  // malformed, or well formed and too large
      std::string_view digits(t);
      if (std::strchr("KMGkmg", digits.back())) digits.remove_suffix(1);
      const bool well_formed = !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) {
                                 return std::isdigit(static_cast<unsigned char>(c));
                               });
      return {std::nullopt, well_formed ? "too large (more than 2^63-1 bytes)" : ""};
    }
    n = *bytes;
  } else {
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
    if (ec == std::errc::result_out_of_range) return {std::nullopt, "too large for a 64-bit integer"};
    if (ec != std::errc() || end != t.data() + t.size()) return {std::nullopt, ""};
  }
  if (n < spec.min) return {std::nullopt, fmt::format("below the minimum {}", spec.min)};
  if (n > spec.max) return {std::nullopt, fmt::format("above the maximum {}", spec.max)};
  return {n, ""};
}

// What a valid value of `spec` looks like, for messages.
std::string range_text(const OptionSpec& spec) {
  return spec.max == INT64_MAX ? fmt::format(">= {}", spec.min) : fmt::format("from {} to {}", spec.min, spec.max);
}

std::string expected_text(const OptionSpec& spec) {
  if (spec.id == Opt::Seed) return std::string(kSeedExpected);
  auto range = [&] { return range_text(spec); };
  switch (spec.type) {
    case OptType::Bool: return "a boolean (1/0, on/off, true/false, yes/no, auto)";
    case OptType::Int: return fmt::format("an integer {}", range());
    case OptType::Bytes:
      return fmt::format("a byte count {}: a decimal integer with an optional K, M or G suffix (4K = 4096)", range());
    case OptType::Choice: return fmt::format("one of: {} (or empty)", spec.choices);
    case OptType::List:
      return spec.entry_form.empty() ? "comma-separated words" : fmt::format("comma-separated {} entries", spec.entry_form);
    case OptType::String: return "text";
  }
  return "?";
}

struct Problem {
  bool bad = false;
  std::string what;  // "" when the value is simply not of the type (the expectation says it all)
};

Problem value_problem(const OptionSpec& spec, std::string_view v) {
  switch (spec.type) {
    case OptType::Bool: return {!bool_value(v), ""};
    case OptType::Int:
    case OptType::Bytes: {
      if (spec.id == Opt::Seed) {
        std::string p = seed_problem(v);
        return {!p.empty(), p == "not an integer" ? "" : p};
      }
      IntValue n = int_value(spec, v);
      return {!n.value, n.problem};
    }
    case OptType::Choice: {
      std::string t = trim(v);
      std::vector<std::string> choices = split_words(spec.choices);
      return {!t.empty() && std::find(choices.begin(), choices.end(), t) == choices.end(), ""};
    }
    case OptType::List:
      if (spec.check_entry)
        for (const std::string& entry : split_words(v))
          if (std::string p = spec.check_entry(entry); !p.empty()) return {true, fmt::format("entry '{}': {}", entry, p)};
      return {};
    case OptType::String: return {};
  }
  return {};
}

void validate(const OptionSpec& spec, std::string_view v) {
  if (std::string p = option_problem(spec, v); !p.empty()) throw Error(p);
}

const OptionSpec& checked_spec(Opt id, std::initializer_list<OptType> types) {
  const OptionSpec& spec = option_spec(id);
  KILN_CHECK(std::find(types.begin(), types.end(), spec.type) != types.end(), "option {} is of type {}", spec.env,
             opt_type_name(spec.type));
  return spec;
}

// The valid values of an Int, Bytes or List row, for the help ("" for the other types: their type says it).
std::string valid_values_text(const OptionSpec& spec) {
  if (spec.id == Opt::Seed) return "from 0 to 18446744073709551615";
  if (spec.type == OptType::Int) return range_text(spec);
  if (spec.type == OptType::Bytes) return range_text(spec) + " bytes";
  if (spec.type == OptType::List && !spec.entry_form.empty()) return std::string(spec.entry_form);
  return "";
}

}  // namespace

const std::vector<OptionSpec>& option_table() { return kTable; }

void load_options() { raw_value(Opt::Logs); }

std::vector<OptionInEffect> options_in_effect() {
  std::vector<OptionInEffect> out;
  for (const OptionSpec& spec : kTable) {
    OptionInEffect o;
    o.env = std::string(spec.env);
    o.value = raw_value(spec.id);
    {
      State& s = state();
      std::lock_guard<std::mutex> lock(s.mutex);
      o.set = s.overrides.count(spec.id) || s.environment.count(spec.id);
    }
    out.push_back(std::move(o));
  }
  return out;
}

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
    case OptType::Bytes: return "bytes";
    case OptType::String: return "string";
    case OptType::Choice: return "choice";
    case OptType::List: return "list";
  }
  return "?";
}

bool opt_bool(Opt id) {
  const OptionSpec& spec = checked_spec(id, {OptType::Bool});
  std::string v = raw_value(id);
  validate(spec, v);
  return *bool_value(v);
}

int64_t opt_int(Opt id) {
  KILN_ASSERT(id != Opt::Seed, "KILN_SEED is read with opt_seed() (core/seed.h): a seed may exceed int64_t");
  const OptionSpec& spec = checked_spec(id, {OptType::Int, OptType::Bytes});
  std::string v = raw_value(id);
  validate(spec, v);
  return *int_value(spec, v).value;
}

uint64_t opt_seed() {
  const OptionSpec& spec = option_spec(Opt::Seed);
  std::string v = raw_value(Opt::Seed);
  validate(spec, v);
  return *parse_seed(v);
}

std::string opt_string(Opt id) {
  const OptionSpec& spec = checked_spec(id, {OptType::String, OptType::Choice});
  std::string v = raw_value(id);
  validate(spec, v);
  return spec.type == OptType::Choice ? trim(v) : v;
}

std::vector<std::string> split_option_list(std::string_view value) { return split_words(value); }

std::vector<std::string> opt_list(Opt id) {
  const OptionSpec& spec = checked_spec(id, {OptType::List});
  std::string v = raw_value(id);
  validate(spec, v);
  return split_words(v);
}

std::string option_problem(const OptionSpec& spec, std::string_view value) {
  Problem p = value_problem(spec, value);
  if (!p.bad) return "";
  return fmt::format("{}={}: {}{}expected {}", spec.env, value, p.what, p.what.empty() ? "" : "; ", expected_text(spec));
}

std::vector<std::string> option_errors() {
  load_options();
  std::map<Opt, std::string> set;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    set = s.environment;
    for (const auto& [id, v] : s.overrides) set[id] = v;
  }
  std::vector<std::string> out;
  for (const auto& [id, v] : set)
    if (std::string p = option_problem(option_spec(id), v); !p.empty()) out.push_back(p);
  return out;
}

void check_options() {
  // Cached per options generation: the environment is read once, overrides bump the generation.
  static std::atomic<uint64_t> checked{0};  // generation + 1 of the last check that passed
  const uint64_t want = options_generation() + 1;
  if (checked.load(std::memory_order_acquire) == want) return;
  std::vector<std::string> errors = option_errors();
  if (errors.size() == 1) throw Error(errors[0]);
  if (!errors.empty()) throw Error(fmt::format("{} invalid settings:\n  {}", errors.size(), fmt::join(errors, "\n  ")));
  checked.store(want, std::memory_order_release);
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
    if (std::string v = valid_values_text(spec); !v.empty()) out += fmt::format("  {:<22} valid: {}\n", "", v);
    if (spec.repro_settable()) out += fmt::format("  {:<22} a repro file may set it\n", "");
    out += fmt::format("  {:<22} {}\n\n", "", spec.help);
  }
  out += "Log channels (KILN_LOGS=a,b; an umbrella below, or all; -name turns channels off again):\n";
  for (int i = 0; i < kNumLogChannels; ++i)
    out += fmt::format("  {:<12} {}\n", log_channel_name(LogChannel(i)), log_channel_help(LogChannel(i)));
  out += "Umbrellas (each turns on its stage's channels):\n";
  for (std::string_view umbrella : log_umbrellas()) {
    std::vector<std::string_view> names;
    for (LogChannel c : log_umbrella_channels(umbrella)) names.push_back(log_channel_name(c));
    out += fmt::format("    {}: {}\n", umbrella, fmt::join(names, ", "));
  }
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
      "takes a decimal integer; `bytes` a decimal integer with an optional binary suffix K, M or G (4K = 4096);\n"
      "`list` takes comma-separated entries. Each row says which values are valid. `kiln` checks every set\n"
      "`KILN_*` variable at start-up, whichever command and backend run, and reports each invalid one\n"
      "(`kiln: error: KILN_REPRO_LEVEL=9: above the maximum 4; expected an integer from 1 to 4`, exit 2); the library\n"
      "raises the same message as a kiln::Error (`check_options()`, called by `find_backend` and `compile`).\n\n"
      "Repro: whether a repro file's `config:` lines may set the option (docs/repro-format.md). Only options\n"
      "that change what is computed may; paths, caches and anything that loads code or writes files may not.\n\n"
      "| Variable | Type | Default | Repro | Meaning |\n|---|---|---|---|---|\n";
  for (const OptionSpec& spec : kTable) {
    std::string help(spec.help);
    if (!spec.choices.empty()) help += fmt::format(" Choices: {}.", spec.choices);
    if (std::string v = valid_values_text(spec); !v.empty()) help += fmt::format(" Valid: {}.", v);
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", spec.env, opt_type_name(spec.type),
                       spec.default_value.empty() ? "(empty)" : fmt::format("`{}`", spec.default_value),
                       spec.repro_settable() ? "yes" : "no", help);
  }
  out += "\n## Log channels\n\n`KILN_LOGS=passes,fusion` (or `all`) prints these channels on stderr as "
         "`[kiln:<channel>] message`; every line of a multi-line event (a graph, generated code) carries the prefix. "
         "An umbrella turns on all of one stage's channels (`KILN_LOGS=inductor`, as `TORCH_LOGS=inductor`), "
         "`-name` turns a channel or umbrella off again (`KILN_LOGS=inductor,-output_code`), and `+name` is `name` "
         "(TORCH_LOGS's `+` asks for more detail; each kiln channel has one level). Entries apply in order.\n\n"
         "| Channel | What it prints |\n|---|---|\n";
  for (int i = 0; i < kNumLogChannels; ++i)
    out += fmt::format("| `{}` | {} |\n", log_channel_name(LogChannel(i)), log_channel_help(LogChannel(i)));
  out += "\n| Umbrella | Channels |\n|---|---|\n";
  for (std::string_view umbrella : log_umbrellas()) {
    std::vector<std::string> names;
    for (LogChannel c : log_umbrella_channels(umbrella)) names.push_back(fmt::format("`{}`", log_channel_name(c)));
    out += fmt::format("| `{}` | {} |\n", umbrella, fmt::join(names, ", "));
  }
  out +=
      "\n## Debug dumps\n\n"
      "With `KILN_DEBUG_DIR=D` every dump gets a directory of its own, `D/<stage>/NNN_<graph>/`: `inductor/` for each\n"
      "compile (its graph, context, every pass's result, `kernels/`, and the cleanup passes' graphs in `cleanup/`),\n"
      "`aot/` for each training compile (each stage's graphs, then `joint.kir`, `forward.kir`, `backward.kir`),\n"
      "`capture/` for each captured graph (`graph.kir` and the values its inputs had in `inputs/`), and a pass\n"
      "pipeline's stage name for each other pipeline run. NNN is the first number whose directory does not exist\n"
      "yet, so a recompile, another graph of the same name or another process writing to the same `D` never\n"
      "overwrites a dump. `D/index.tsv` gets one line per directory as it is claimed: the directory, the graph's\n"
      "name, the process id and the process's command line, tab-separated (tabs, line breaks and backslashes in\n"
      "them written as `\\t`, `\\n`, `\\\\`).\n"
      "\n## Bisection\n\n"
      "Every pass application, decomposition, lowering and fusion decision asks one hook,\n"
      "`should_run(stage, subsystem, debug_info)` (src/core/bisect.h), before it acts. The hook counts the\n"
      "applications of each `stage:subsystem` (and of each stage) from 0 in the order they are asked and\n"
      "answers false when\n\n"
      "- `KILN_BISECT_DISABLE` names the subsystem (`passes:cse`) or its whole stage (`passes`), or\n"
      "- `KILN_BISECT_LIMIT` gives `stage:subsystem=N` (or `stage=N`) and this application's count is N or\n"
      "  more: only the first N applications run.\n\n"
      "A skipped application leaves a correct (possibly slower) program, so a bisector can binary-search N for\n"
      "the first application that makes a result wrong. The `bisect` log channel prints each decision with\n"
      "its count and the site's debug info. An entry that names no site (a misspelt stage or subsystem) is\n"
      "an error naming the closest site; an entry whose site was never asked in a run (its forked children\n"
      "included) gets one warning when the run ends (the setting changed nothing; src/core/fired.h). Compiled\n"
      "programs stay cached under a setting, keyed by it. The sites (`stage:subsystem`):\n\n";
  std::map<std::string_view, std::vector<std::string_view>> by_stage;
  for (const auto& [stage, subsystem] : bisect_sites()) by_stage[stage].push_back(subsystem);
  for (const auto& [stage, subsystems] : by_stage)
    out += fmt::format("- `{}`: {}\n", stage, fmt::format("`{}`", fmt::join(subsystems, "`, `")));
  return out;
}

std::optional<int64_t> parse_byte_count(std::string_view text) {
  if (text.empty()) return std::nullopt;
  int64_t scale = 1;
  char last = char(std::toupper(static_cast<unsigned char>(text.back())));
  if (last == 'K' || last == 'M' || last == 'G') {
    scale = last == 'K' ? 1024 : last == 'M' ? 1024 * 1024 : 1024 * 1024 * 1024;
    text.remove_suffix(1);
  }
  int64_t n = 0, bytes = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  if (__builtin_mul_overflow(n, scale, &bytes)) return std::nullopt;
  return bytes;
}

}  // namespace kiln
