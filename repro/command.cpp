// The reproduce lines of every tool and the settings they carry (repro/command.h).
#include "repro/command.h"

#include <fmt/format.h>

#include "core/escape.h"
#include "core/options.h"
#include "core/seed.h"

namespace kiln {

namespace {

// A boolean option's default as the getters read it: `auto` is on in builds without NDEBUG.
bool bool_default(std::string_view text) {
  if (text == "auto") {
#ifdef NDEBUG
    return false;
#else
    return true;
#endif
  }
  return text == "1" || text == "on" || text == "true" || text == "yes";
}

}  // namespace

std::map<std::string, std::string> settings_in_effect() {
  std::map<std::string, std::string> out;
  for (const OptionSpec& s : option_table()) {
    // Only what a repro may set (options.h): tool settings describe how kiln was debugging, not the bug, and
    // paths and caches are never taken from a repro.
    if (!s.repro_settable()) continue;
    std::string v;
    bool differs = false;
    switch (s.type) {
      case OptType::String:
      case OptType::Choice: v = opt_string(s.id); differs = v != s.default_value; break;
      case OptType::List: v = fmt::format("{}", fmt::join(opt_list(s.id), ",")); differs = v != s.default_value; break;
      case OptType::Int:
      case OptType::Bytes:  // a seed may exceed int64_t: read by its own parser (core/seed.h)
        v = s.id == Opt::Seed ? std::to_string(opt_seed()) : std::to_string(opt_int(s.id));
        differs = v != s.default_value;
        break;
      case OptType::Bool: {  // KILN_OWN_EXP=0 changes what is computed as much as an integer does
        const bool on = opt_bool(s.id);
        v = on ? "1" : "0";
        differs = on != bool_default(s.default_value);
        break;
      }
    }
    if (differs) out[std::string(s.env)] = v;
  }
  return out;
}

std::string environment_prefix(const std::vector<std::pair<std::string, std::string>>& settings) {
  std::map<std::string, std::string> env = settings_in_effect();
  for (const auto& [name, value] : settings) {
    if (value.empty()) env.erase(name);
    else env[name] = value;
  }
  std::string out;
  for (const auto& [name, value] : env) out += fmt::format("{}={} ", name, shell_quote(value));
  return out;
}

std::string reproduce_command(const RunLine& l) {
  std::string out = environment_prefix(l.settings);
  if (l.repro_run) return out + "kiln repro run " + shell_quote(l.file);
  out += "kiln run " + shell_quote(l.file);
  if (!l.backend.empty()) out += " --backend " + shell_quote(l.backend);
  if (!l.mode.empty() && l.mode != "default") out += " --mode " + shell_quote(l.mode);
  if (!l.inputs_dir.empty()) out += " --inputs " + shell_quote(l.inputs_dir);
  else if (l.seed) out += fmt::format(" --seed {}", *l.seed);
  if (l.tolerance != 1e-4) out += fmt::format(" --tol {}", l.tolerance);
  out += " --check";
  if (l.gradients) out += " --grad";
  return out;
}

}  // namespace kiln
