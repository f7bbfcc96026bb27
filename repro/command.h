// The one generator of the reproduce lines every tool prints (`kiln bisect`'s `reproduce:` and `passes with:`,
// `kiln doctor`'s report, `kiln minify`'s and the repro hook's "check it with:", `kiln gate`'s regressions): a
// shell command built from the run's whole configuration (every KILN_* setting in effect that changes what is
// computed, the trial's own settings over them, the backend, the inputs, the seed, the tolerance, what is
// checked, the compile mode), each word quoted with shell_quote (core/escape.h), so a pasted line fails in a
// clean shell exactly as the report says, and a file named `$(touch PWNED).kir` is only a file name.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

// Every option a repro may set (the rows marked ReproSettable::Yes: the options that change what is computed)
// whose value in this process differs from its default, as environment variable -> value. A repro's `config:`,
// the reproduce lines and the minifier record exactly these.
std::map<std::string, std::string> settings_in_effect();

// What a reproduce line runs: `kiln run GRAPH ... --check` (a .kir graph, or a repro file's graph with its
// configuration, `kiln run` accepts both) or, with `repro_run`, `kiln repro run FILE`.
struct RunLine {
  std::string file;                  // the .kir graph or repro file
  bool repro_run = false;            // `kiln repro run FILE` (its backend, inputs and tolerance are the file's)
  std::string backend;               // kiln run --backend
  std::optional<uint64_t> seed;      // --seed N ...
  std::string inputs_dir;            // ... or --inputs DIR (neither: a repro file's own inputs)
  double tolerance = 1e-4;           // --tol (written only when not the default)
  bool gradients = false;            // --grad: outputs then gradients
  std::string mode;                  // --mode (written only when not "default")
  // Settings over those in effect (a bisection trial's KILN_BISECT_LIMIT, a flip's KILN_OWN_EXP=0); a value of
  // "" removes a setting from the line.
  std::vector<std::pair<std::string, std::string>> settings;
};

// The command, `NAME=VALUE ... kiln run ...`, every word shell-quoted.
std::string reproduce_command(const RunLine& line);

// `NAME=VALUE ` for every setting in effect with `settings` over them (as RunLine::settings), quoted: the prefix
// of reproduce_command, and of the lines of subjects that are not kiln commands (`kiln bisect --cmd`'s).
std::string environment_prefix(const std::vector<std::pair<std::string, std::string>>& settings);

}  // namespace kiln
