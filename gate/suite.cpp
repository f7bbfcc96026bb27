// Suite discovery and the gate.json manifest (see suite.h).
#include "gate/suite.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/files.h"

namespace kiln::gate {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kManifestName = "gate.json";

json read_manifest(const fs::path& file) {
  const std::string text = read_input_file(file.string(), "suite manifest");
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    fail("{}: the suite manifest is not valid JSON ({}); see docs/gate.md", file.string(), e.what());
  }
}

// `name` relative to root, with '/' separators; an error for a path that leaves the suite.
std::string entry_name(const fs::path& root, const fs::path& file, const std::string& where) {
  fs::path rel = fs::weakly_canonical(file).lexically_relative(fs::weakly_canonical(root));
  KILN_CHECK(!rel.empty() && *rel.begin() != "..", "{}: entry {} lies outside the suite directory {}", where,
             file.string(), root.string());
  return rel.generic_string();
}

Entry make_entry(const fs::path& root, const fs::path& file, const std::string& where) {
  Entry e;
  e.path = file.string();
  e.name = entry_name(root, file, where);
  std::string ext = file.extension().string();
  KILN_CHECK(ext == ".kir" || ext == ".repro", "{}: entry {} is neither a .kir graph nor a .repro file", where,
             e.name);
  e.kind = ext == ".repro" ? EntryKind::Repro : EntryKind::Graph;
  fs::path inputs = file.parent_path() / (file.stem().string() + ".inputs");
  if (e.kind == EntryKind::Graph && fs::is_directory(inputs)) e.inputs_dir = inputs.string();
  return e;
}

template <class T>
T typed(const json& v, const std::string& where, const std::string& key, const char* what) {
  try {
    return v.get<T>();
  } catch (const json::exception&) {
    fail("{}: '{}' must be {} (got {})", where, key, what, v.dump());
  }
}

// Applies one entry's settings object ({"seed": 3, "tolerance": 1e-3, ...}) from the manifest.
void apply_settings(Entry& e, const json& settings, const fs::path& root, const std::string& where) {
  KILN_CHECK(settings.is_object(), "{}: the settings of entry {} must be an object", where, e.name);
  for (const auto& [key, v] : settings.items()) {
    if (key == "path") continue;
    if (key == "seed") {
      KILN_CHECK(v.is_number_unsigned(), "{}: 'seed' of {} must be a non-negative integer (got {})", where, e.name,
                 v.dump());
      e.seed = v.get<uint64_t>();
    } else if (key == "tolerance") {
      double t = typed<double>(v, where, key, "a number");
      KILN_CHECK(t > 0 && t < 1, "{}: 'tolerance' of {} must be in (0, 1) (got {})", where, e.name, t);
      e.tolerance = t;
    } else if (key == "timeout") {
      double t = typed<double>(v, where, key, "a number of seconds");
      KILN_CHECK(t > 0, "{}: 'timeout' of {} must be positive (got {})", where, e.name, t);
      e.timeout_s = t;
    } else if (key == "inputs") {
      fs::path dir = root / typed<std::string>(v, where, key, "a directory name");
      entry_name(root, dir, where);  // must stay inside the suite
      KILN_CHECK(fs::is_directory(dir), "{}: 'inputs' of {} names {}, which is not a directory", where, e.name,
                 dir.string());
      e.inputs_dir = dir.string();
    } else if (key == "grad") {
      KILN_CHECK(v.is_boolean(), "{}: 'grad' of {} must be true or false (got {})", where, e.name, v.dump());
      KILN_CHECK(e.kind == EntryKind::Graph, "{}: 'grad' of {}: a repro file records what it checks itself "
                 "(`check: gradients`)", where, e.name);
      e.gradients = v.get<bool>();
    } else if (key == "skip") {
      e.skip_reason = typed<std::string>(v, where, key, "a reason (text)");
      KILN_CHECK(!e.skip_reason.empty(), "{}: 'skip' of {} needs a reason", where, e.name);
    } else {
      fail("{}: unknown key '{}' in entry {} (known: path, seed, tolerance, timeout, inputs, grad, skip)", where, key,
           e.name);
    }
  }
}

std::vector<Entry> discover(const fs::path& root) {
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_directory() && it->path().extension() == ".inputs") {
      it.disable_recursion_pending();  // a graph's inputs, not entries
      continue;
    }
    std::string ext = it->path().extension().string();
    if (it->is_regular_file() && (ext == ".kir" || ext == ".repro")) files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  std::vector<Entry> entries;
  for (const fs::path& f : files) entries.push_back(make_entry(root, f, root.string()));
  return entries;
}

}  // namespace

Suite load_suite(const std::string& path, uint64_t default_seed) {
  fs::path p(path);
  KILN_CHECK(fs::exists(p), "{}: no such suite (expected a directory of .kir/.repro files or a .json manifest)",
             path);
  Suite s;
  json manifest;
  std::string where;
  if (fs::is_directory(p)) {
    s.root = p.string();
    s.entries = discover(p);
    for (Entry& e : s.entries) e.seed = default_seed;
    if (fs::exists(p / kManifestName)) manifest = read_manifest(p / kManifestName), where = (p / kManifestName).string();
  } else {
    KILN_CHECK(p.extension() == ".json", "{}: a suite is a directory or a .json manifest", path);
    s.root = p.parent_path().empty() ? "." : p.parent_path().string();
    manifest = read_manifest(p);
    where = path;
  }
  if (!manifest.is_null()) {
    KILN_CHECK(manifest.is_object(), "{}: the manifest must be a JSON object with an \"entries\" list", where);
    for (const auto& [key, v] : manifest.items())
      KILN_CHECK(key == "entries", "{}: unknown top-level key '{}' (known: entries)", where, key);
    const json& listed = manifest.contains("entries") ? manifest["entries"] : json::array();
    KILN_CHECK(listed.is_array(), "{}: \"entries\" must be a list of {{\"path\": ..., ...}} objects", where);
    bool explicit_list = !fs::is_directory(p);
    std::set<std::string> seen;
    for (const json& item : listed) {
      KILN_CHECK(item.is_object() && item.contains("path") && item["path"].is_string(),
                 "{}: each entry needs a \"path\" (got {})", where, item.dump());
      fs::path file = fs::path(s.root) / item["path"].get<std::string>();
      KILN_CHECK(fs::is_regular_file(file), "{}: entry {} names no file", where, item["path"].get<std::string>());
      Entry fresh = make_entry(s.root, file, where);
      fresh.seed = default_seed;
      KILN_CHECK(seen.insert(fresh.name).second, "{}: entry {} is listed twice", where, fresh.name);
      auto found = std::find_if(s.entries.begin(), s.entries.end(), [&](const Entry& e) { return e.name == fresh.name; });
      if (found == s.entries.end()) {
        KILN_CHECK(explicit_list, "{}: entry {} is not a .kir or .repro file of the suite directory", where,
                   fresh.name);
        s.entries.push_back(fresh);
        found = s.entries.end() - 1;
      }
      apply_settings(*found, item, s.root, where);
    }
  }
  KILN_CHECK(!s.entries.empty(), "{}: the suite has no entries (no .kir or .repro files)", path);
  return s;
}

}  // namespace kiln::gate
