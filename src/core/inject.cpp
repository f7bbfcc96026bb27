// KILN_INJECT (inject.h): the one list of injectable kinds, the options table's entry check, and the parsed spec.
#include "core/inject.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fired.h"
#include "core/options.h"

namespace kiln {
namespace {

// Every kind, in the order messages list them, and whether the compiler takes it (the rest: inject_test only).
struct KindRow {
  InjectKind kind;
  std::string_view name;
  bool compiler;
};
constexpr KindRow kKinds[] = {
    {InjectKind::CompileError, "compile_error", true}, {InjectKind::RuntimeError, "runtime_error", true},
    {InjectKind::Crash, "crash", true},                {InjectKind::Accuracy, "accuracy", true},
    {InjectKind::Decomposition, "decomposition", true}, {InjectKind::Hang, "hang", false},
    {InjectKind::Vjp, "vjp", true},
};

// The targets that are not ops, each taking only the kind accuracy.
constexpr std::string_view kPassTargets[] = {"fusion", "partition"};
bool is_pass_target(std::string_view t) {
  return std::find(std::begin(kPassTargets), std::end(kPassTargets), t) != std::end(kPassTargets);
}

OpExists g_op_exists = nullptr;  // set_op_exists_check

bool op_exists(std::string_view name) {
  if (g_op_exists) return g_op_exists(name);
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {  // without the op table: its form
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
         });
}

std::string kind_list(bool compiler_only) {
  std::string s;
  for (const KindRow& r : kKinds)
    if (r.compiler || !compiler_only) s += (s.empty() ? "" : ", ") + std::string(r.name);
  return s;
}

}  // namespace

void set_op_exists_check(OpExists check) { g_op_exists = check; }

std::string_view inject_kind_name(InjectKind k) {
  for (const KindRow& r : kKinds)
    if (r.kind == k) return r.name;
  return "?";
}

std::optional<InjectKind> find_inject_kind(std::string_view name) {
  for (const KindRow& r : kKinds)
    if (r.name == name) return r.kind;
  return std::nullopt;
}

bool compiler_takes(InjectKind k) {
  for (const KindRow& r : kKinds)
    if (r.kind == k) return r.compiler;
  return false;
}

std::optional<InjectKind> InjectSpec::kind_for(std::string_view target) const {
  for (const Entry& e : entries)
    if (e.target == target) return e.kind;
  return std::nullopt;
}

int InjectSpec::index_of(std::string_view target) const {
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i].target == target) return int(i);
  return -1;
}

std::string InjectSpec::str() const {
  std::string s;
  for (const Entry& e : entries) s += (s.empty() ? "" : ",") + e.target + ":" + std::string(inject_kind_name(e.kind));
  return s;
}

std::string inject_entry_problem(std::string_view e) {
  size_t colon = e.find(':');
  if (colon == std::string_view::npos) return "no ':kind'";
  std::string_view target = e.substr(0, colon), kind = e.substr(colon + 1);
  if (!is_pass_target(target) && !op_exists(target)) return fmt::format("unknown op '{}' (`kiln ops` lists them)", target);
  if (!find_inject_kind(kind)) return fmt::format("unknown kind '{}'", kind);
  return "";
}

std::string_view inject_entry_form() {
  static const std::string form = fmt::format("op:kind (kinds: {})", kind_list(false));
  return form;
}

InjectSpec InjectSpec::parse(std::string_view list, std::string_view where) {
  InjectSpec spec;
  for (const std::string& entry : split_option_list(list)) {
    const std::string_view item = entry;
    size_t colon = item.find(':');
    KILN_CHECK(colon != std::string_view::npos, "{}: entry '{}' must be op:kind (e.g. relu:accuracy)", where, item);
    std::optional<InjectKind> kind = find_inject_kind(item.substr(colon + 1));
    KILN_CHECK(kind, "{}: unknown kind '{}' in '{}' (kinds: {})", where, item.substr(colon + 1), item, kind_list(false));
    spec.entries.push_back({std::string(item.substr(0, colon)), *kind});
  }
  return spec;
}

InjectSpec InjectSpec::from_options() {
  InjectSpec spec;
  for (const std::string& item : opt_list(Opt::Inject)) spec.entries.push_back(parse(item).entries.at(0));
  note_settings_read();  // an entry that then never fires is reported at the end of the run (core/fired.h)
  return spec;
}

InjectSpec InjectSpec::for_compiler() { return from_options().checked_for_compiler(); }

InjectSpec InjectSpec::checked_for_compiler() const {
  for (const Entry& e : entries) {
    const std::string item = e.target + ":" + std::string(inject_kind_name(e.kind));
    if (is_pass_target(e.target)) {
      KILN_CHECK(e.kind == InjectKind::Accuracy, "KILN_INJECT: {} supports only the kind accuracy, got '{}'", e.target,
                 inject_kind_name(e.kind));
      continue;
    }
    KILN_CHECK(op_exists(e.target), "KILN_INJECT: unknown op '{}' in '{}' (run `kiln ops` for the list)", e.target, item);
    KILN_CHECK(compiler_takes(e.kind), "KILN_INJECT: unknown kind '{}' in '{}' (kinds: {}; and {}:accuracy, {}:accuracy)",
               inject_kind_name(e.kind), item, kind_list(true), kPassTargets[0], kPassTargets[1]);
  }
  return *this;
}

}  // namespace kiln
