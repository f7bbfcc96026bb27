// KILN_INJECT parsing for the inductor's bug injection (see inject.h).
#include "inductor/inject.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/fired.h"
#include "core/options.h"
#include "ops/op_info.h"

namespace kiln::inductor {

std::string InjectSpec::kind_for(const std::string& target) const {
  for (const Entry& e : entries)
    if (e.target == target) return e.kind;
  return "";
}

int InjectSpec::index_of(const std::string& target) const {
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i].target == target) return int(i);
  return -1;
}

InjectSpec InjectSpec::from_options() {
  InjectSpec spec;
  for (const std::string& item : opt_list(Opt::Inject)) {
    size_t colon = item.find(':');
    KILN_CHECK(colon != std::string::npos, "KILN_INJECT: entry '{}' must be op:kind (e.g. relu:accuracy)", item);
    Entry e{item.substr(0, colon), item.substr(colon + 1)};
    if (e.target == "fusion" || e.target == "partition") {
      KILN_CHECK(e.kind == "accuracy", "KILN_INJECT: {} supports only the kind accuracy, got '{}'", e.target, e.kind);
    } else {
      KILN_CHECK(find_op(e.target), "KILN_INJECT: unknown op '{}' in '{}' (run `kiln ops` for the list)", e.target, item);
      KILN_CHECK(e.kind == "compile_error" || e.kind == "runtime_error" || e.kind == "crash" || e.kind == "accuracy" ||
                     e.kind == "decomposition" || e.kind == "vjp",
                 "KILN_INJECT: unknown kind '{}' in '{}' (kinds: compile_error, runtime_error, crash, accuracy, "
                 "decomposition, vjp; and fusion:accuracy, partition:accuracy)", e.kind, item);
    }
    spec.entries.push_back(e);
  }
  note_settings_read();  // an entry that then never fires is reported at the end of the run (core/fired.h)
  return spec;
}

std::string InjectSpec::str() const {
  std::string s;
  for (const Entry& e : entries) s += (s.empty() ? "" : ",") + e.target + ":" + e.kind;
  return s;
}

}  // namespace kiln::inductor
