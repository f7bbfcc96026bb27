// The one options table (decision 10): every KILN_* setting is a row (name, environment variable, type,
// default, help). Values are read from the environment once, on first use, and can be overridden in code
// (tests, the CLI). Each row also says which values are valid (an integer's range, a list entry's form), and
// one validation (option_problem) serves the getters, set_option and the start-up check of every set variable
// (option_errors). `kiln --help-options` prints the table and docs/options.md is generated from it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

enum class Opt : uint8_t {
  Logs,
  DebugDir,
  Trace,
  TraceRuntime,
  ReproAfter,
  ReproLevel,
  Inject,
  CacheDir,
  CacheSizeLimit,
  StreamMinBytes,
  Verify,
  Seed,
  BisectLimit,
  BisectDisable,
  Backend,
  CaptureVerify,
  RecompileLimit,
  OwnExp,
  VectorWidth,
  NumOptions
};

enum class OptType : uint8_t {
  Bool,    // 1/0, on/off, true/false, yes/no; `auto` = on in debug builds (NDEBUG undefined)
  Int,     // a decimal integer within the row's [min, max]
  Bytes,   // a byte count within [min, max]: a decimal integer with an optional binary suffix K, M or G (4K = 4096)
  String,  // free text (a path, ...)
  Choice,  // one of the words listed in `choices`
  List,    // comma-separated words (empty = none)
};

// What is wrong with one entry of a List option ("" when it is valid).
using EntryCheck = std::string (*)(std::string_view entry);
enum class ReproSettable : uint8_t { No, Yes };

struct OptionSpec {
  Opt id;
  std::string_view env;            // KILN_LOGS
  OptType type;
  std::string_view default_value;  // as it would be written in the environment
  std::string_view choices;        // Choice: the allowed words, comma-separated ("" is always allowed)
  std::string_view help;
  // Whether a repro file's `config:` lines may set it (docs/repro-format.md): only options that change what
  // is computed (bug injection, bisection, numerics). Never paths, caches, or anything that loads code or
  // writes files: a repro is untrusted input that users are asked to "just run". Not settable unless the row
  // says so (an enum, so a row with its fields out of place does not compile).
  ReproSettable repro = ReproSettable::No;
  int64_t min = 0, max = INT64_MAX;  // Int, Bytes: the valid values, inclusive
  std::string_view entry_form;       // List: what an entry looks like, for messages ("stage:subsystem=N")
  EntryCheck check_entry = nullptr;  // List: validates each entry (null: any word)
  bool repro_settable() const { return repro == ReproSettable::Yes; }
};

const std::vector<OptionSpec>& option_table();
const OptionSpec& option_spec(Opt id);
std::optional<Opt> find_option(std::string_view env_name);
std::string_view opt_type_name(OptType t);
// The option named `env_name` if a repro file may set it; a kiln::Error otherwise, saying why (unknown, or not
// settable by a repro, listing those that are).
Opt repro_settable_option(std::string_view env_name);

// Typed getters: the override if one is set, else the environment as read at first use, else the default.
// A malformed environment value is a kiln::Error naming the variable and what would be valid.
bool opt_bool(Opt id);
int64_t opt_int(Opt id);
std::string opt_string(Opt id);             // String and Choice options
std::vector<std::string> opt_list(Opt id);  // List options (trimmed, empty entries dropped)
// A list value as opt_list splits it: at commas, each entry trimmed of spaces and tabs, empty ones dropped. Reads
// no state (safe from an atexit handler).
std::vector<std::string> split_option_list(std::string_view value);
// `text` as a count of bytes: a decimal integer with an optional binary suffix K, M or G (4K = 4096; sysfs
// writes cache sizes this way); nullopt when it is not one or does not fit in int64_t. Bytes options are
// parsed with it.
std::optional<int64_t> parse_byte_count(std::string_view text);

// The one validation of a value for an option: "" when `value` is valid, else the message a user sees,
// `KILN_SEED=-1: below the minimum 0; expected an integer from 0 to 9223372036854775807`.
std::string option_problem(const OptionSpec& spec, std::string_view value);
// Every set KILN_* variable (and every override) whose value is invalid, one message each (option_problem),
// in table order. The CLI prints them all at start-up and exits 2.
std::vector<std::string> option_errors();
// kiln::Error listing option_errors() when there are any. Library entry points (find_backend, compile)
// call it, so a program that never runs the CLI does not silently run with a bad setting either.
void check_options();
// Increments whenever an override changes, so caches of derived values (log channels) can refresh.
uint64_t options_generation();

// Overrides an option in code (validated as the environment value would be); reset_option removes it.
void set_option(Opt id, std::string value);
void reset_option(Opt id);
// Sets an option for the lifetime of the guard, then restores the previous override (or none).
class ScopedOption {
 public:
  ScopedOption(Opt id, std::string value);
  ~ScopedOption();
  ScopedOption(const ScopedOption&) = delete;
  ScopedOption& operator=(const ScopedOption&) = delete;

 private:
  Opt id_;
  std::optional<std::string> previous_;
};

// Every option's value as it is in effect (the override, else the environment, else the default), in table
// order, with whether the user set it (environment or override): the configuration a trace records.
struct OptionInEffect {
  std::string env;
  std::string value;
  bool set = false;
};
std::vector<OptionInEffect> options_in_effect();

// Reads the environment now if it has not been read yet (warning about unknown KILN_* variables); the
// getters do this on first use, the CLI calls it at startup so the warnings always appear.
void load_options();

// Warnings for KILN_* variables in `environ_entries` ("NAME=value" strings) that are not in the table, each
// naming the closest valid variable. Emitted on stderr once per process on first use of the table (for
// the real environment); exposed for tests.
std::vector<std::string> unknown_env_warnings(const std::vector<std::string>& environ_entries);

// The table as plain text (`kiln --help-options`) and as Markdown (docs/options.md); both list the log
// channels KILN_LOGS accepts.
std::string options_help_text();
std::string options_markdown();

// Levenshtein distance, for "did you mean" suggestions.
int edit_distance(std::string_view a, std::string_view b);

}  // namespace kiln
