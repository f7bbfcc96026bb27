// The kernel disk cache's files (kernel_disk_cache.h), shared by the CPU JIT and the CUDA backend.
#include "inductor/kernel_disk_cache.h"

#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <variant>
#include <vector>

#include "core/error.h"
#include "core/escape.h"
#include "core/files.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/trace.h"
#include "core/options.h"

namespace kiln::inductor {

namespace fs = std::filesystem;

namespace {

// A disk cache entry is two files named by the SHA-256 of the kernel's full key material: KEY.o (or .cubin), the
// object, and KEY.meta, written after it, which records the object's SHA-256 and size and the key material:
//
//   kiln-kernel-cache-entry 1
//   object-sha256 <64 hex digits>
//   object-bytes <n>
//   key-bytes <n>
//   <the key material>
//
// An entry is used only when both files exist, the key material is the one looked up (no collision) and the
// object has the recorded size and hash; anything else is discarded (with the reason on KILN_LOGS=cache) and
// rebuilt. Only files named this way whose .meta starts with the first line are kiln's, and only they are evicted.
constexpr std::string_view kEntryMagic = "kiln-kernel-cache-entry 1\n";
constexpr int64_t kMaxEntryBytes = int64_t(256) << 20;

bool is_entry_stem(const std::string& stem) {
  return stem.size() == 64 && std::all_of(stem.begin(), stem.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string entry_meta(const std::string& key_material, const std::string& object) {
  return fmt::format("{}object-sha256 {}\nobject-bytes {}\nkey-bytes {}\n{}", kEntryMagic, sha256_hex(object),
                     object.size(), key_material.size(), key_material);
}

// The object of a cache entry, or why the entry cannot be used.
std::variant<std::string, std::string> read_entry(const fs::path& object_file, const fs::path& meta_file,
                                                  const std::string& key_material) {
  using Result = std::variant<std::string, std::string>;
  auto bad = [](std::string why) { return Result(std::in_place_index<1>, std::move(why)); };
  std::string meta, object;
  try {
    meta = read_input_file(meta_file.string(), "kernel cache entry", kMaxEntryBytes);
    object = read_input_file(object_file.string(), "kernel cache entry", kMaxEntryBytes);
  } catch (const Error& e) {
    return bad(e.what());
  }
  if (!meta.starts_with(kEntryMagic)) return bad("its .meta file is not a kiln cache entry");
  std::string_view rest = std::string_view(meta).substr(kEntryMagic.size());
  auto field = [&](std::string_view name) -> std::string_view {
    if (!rest.starts_with(name) || rest.size() <= name.size() || rest[name.size()] != ' ') return {};
    size_t nl = rest.find('\n');
    if (nl == std::string_view::npos) return {};
    std::string_view value = rest.substr(name.size() + 1, nl - name.size() - 1);
    rest.remove_prefix(nl + 1);
    return value;
  };
  std::string_view hash = field("object-sha256");
  std::optional<uint64_t> object_bytes = parse_number<uint64_t>(field("object-bytes"));
  std::optional<uint64_t> key_bytes = parse_number<uint64_t>(field("key-bytes"));
  if (hash.size() != 64 || !object_bytes || !key_bytes || *key_bytes != rest.size())
    return bad("its .meta file is malformed");
  if (rest != key_material) return bad("it was written for other key material (a hash collision or a stray file)");
  if (*object_bytes != object.size())
    return bad(fmt::format("its object has {} bytes, not the {} recorded (truncated or partly written)", object.size(),
                           *object_bytes));
  if (sha256_hex(object) != hash) return bad("its object's SHA-256 differs from the one recorded (corrupted)");
  return Result(std::in_place_index<0>, std::move(object));
}

}  // namespace

KernelDiskCache::KernelDiskCache(std::string subdirectory, std::string extension)
    : subdirectory_(std::move(subdirectory)), extension_(std::move(extension)) {}

namespace {

// The root of kiln's caches (see Trust in the header), or empty with the reason there is none.
fs::path cache_root(std::string& why_none) {
  std::string dir = opt_string(Opt::CacheDir);
  if (!dir.empty()) return fs::absolute(dir);
  // XDG: a relative $XDG_CACHE_HOME is invalid and ignored.
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg == '/') return fs::path(xdg) / "kiln";
  if (const char* home = std::getenv("HOME"); home && *home == '/') return fs::path(home) / ".cache" / "kiln";
  std::vector<char> buf(16384);
  struct passwd pw, *found = nullptr;
  if (getpwuid_r(geteuid(), &pw, buf.data(), buf.size(), &found) == 0 && found && found->pw_dir &&
      found->pw_dir[0] == '/')
    return fs::path(found->pw_dir) / ".cache" / "kiln";
  why_none = "none of KILN_CACHE_DIR, XDG_CACHE_HOME and HOME is set and this user has no home directory";
  return {};
}

// Whether group `gid` is private to user `uid`: its one member is that user, as a primary group (passwd) or a
// listed member (group), and no one else is in it. Debian and Ubuntu give each user such a group and a umask of
// 002, so the user's directories and files are group-writable by that group alone; Debian's OpenSSH accepts them
// by the same rule (its user-group-modes patch). A group with no member at all is not private (setgid programs
// use those). Looked up once per group and kept: getpwent walks a process-wide cursor.
bool group_private_to(gid_t gid, uid_t uid) {
  static std::mutex mutex;
  static std::map<std::pair<gid_t, uid_t>, bool> known;
  std::lock_guard lock(mutex);
  if (auto it = known.find({gid, uid}); it != known.end()) return it->second;
  bool is_private = false;
  std::vector<char> buf(16384);
  struct group gr, *group = nullptr;
  struct passwd pw, *user = nullptr;
  if (getgrgid_r(gid, &gr, buf.data(), buf.size(), &group) == 0 && group) {
    std::vector<char> user_buf(16384);
    if (getpwuid_r(uid, &pw, user_buf.data(), user_buf.size(), &user) == 0 && user) {
      int members = 0;
      bool only_this_user = true;
      setpwent();
      while (struct passwd* p = getpwent())
        if (p->pw_gid == gid) ++members, only_this_user &= p->pw_uid == uid;
      endpwent();
      for (char** m = group->gr_mem; m && *m; ++m) ++members, only_this_user &= std::strcmp(*m, user->pw_name) == 0;
      is_private = members > 0 && only_this_user;
    }
  }
  known[{gid, uid}] = is_private;
  return is_private;
}

// Whether a user other than this one (or root) can write through these mode bits: others' write bit, or the
// group's when the group is not private to this user.
bool others_can_write(const struct stat& st) {
  if (st.st_mode & S_IWOTH) return true;
  return (st.st_mode & S_IWGRP) && !group_private_to(st.st_gid, geteuid());
}

// Why another user could place or replace files in `dir` (the directory that holds entries), or nullopt when no
// one but this user (or root) can. Checked on the canonical path, so a symbolic link is judged by its target.
std::optional<std::string> writable_by_others(const fs::path& dir) {
  std::error_code ec;
  fs::path existing = dir;  // the deepest part of the path that exists (store() creates the rest, mode 0700)
  while (!fs::exists(existing, ec) && existing.has_relative_path()) existing = existing.parent_path();
  fs::path real = fs::canonical(existing, ec);
  if (ec) return fmt::format("{} cannot be resolved ({})", existing.string(), ec.message());
  const uid_t me = geteuid();
  for (fs::path p = real;; p = p.parent_path()) {
    struct stat st;
    if (::stat(p.c_str(), &st) != 0) return fmt::format("{} cannot be examined ({})", p.string(), std::strerror(errno));
    if (!S_ISDIR(st.st_mode)) return fmt::format("{} is not a directory", p.string());
    if (st.st_uid != me && st.st_uid != 0)
      return fmt::format("{} belongs to another user (uid {}); use a directory of your own (KILN_CACHE_DIR)",
                         p.string(), st.st_uid);
    // Another user may write an ancestor only when its sticky bit stops them renaming this user's entries
    // (/tmp); the directory holding the entries itself must be writable by no one else.
    const bool holds_entries = p == real && existing == dir;
    if (others_can_write(st) && (holds_entries || !(st.st_mode & S_ISVTX)))
      return fmt::format("{} is writable by other users (mode {:04o}); run chmod go-w on it", p.string(),
                         st.st_mode & 07777);
    if (!p.has_relative_path()) return std::nullopt;
  }
}

// Whether `file` (an entry's object or .meta, if present) is a regular file of this user's or root's.
std::optional<std::string> untrusted_entry_file(const fs::path& file) {
  struct stat st;
  if (::lstat(file.c_str(), &st) != 0) return std::nullopt;  // absent: read_entry says so
  if (!S_ISREG(st.st_mode)) return fmt::format("{} is not a regular file", file.string());
  if (st.st_uid != geteuid() && st.st_uid != 0)
    return fmt::format("{} belongs to another user (uid {})", file.string(), st.st_uid);
  if (others_can_write(st)) return fmt::format("{} is writable by other users", file.string());
  return std::nullopt;
}

// Creates `dir` and the missing directories above it, each with mode 0700 (the cache is private to its user).
void create_private_directory(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return;
  if (dir.has_relative_path() && dir.parent_path() != dir) create_private_directory(dir.parent_path());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    fail("{}: cannot create the cache directory ({})", dir.string(), std::strerror(errno));
}

}  // namespace

std::optional<fs::path> KernelDiskCache::directory() const {
  std::string why;
  fs::path root = cache_root(why);
  std::optional<fs::path> dir;
  if (!root.empty()) {
    dir = root / subdirectory_;
    if (std::optional<std::string> unsafe = writable_by_others(*dir)) why = *unsafe, dir.reset();
  }
  if (!dir) {
    // Said once per process and directory: the disk cache is off, the in-memory cache still serves.
    static std::mutex mutex;
    static std::set<std::string> warned;
    std::lock_guard lock(mutex);
    if (warned.insert(why).second)
      std::fprintf(stderr, "kiln: warning: the kernel disk cache is off for this process: %s\n",
                   terminal_safe(why).c_str());
    KILN_LOG(LogChannel::Cache, "no disk cache: {}", why);
  }
  return dir;
}

fs::path KernelDiskCache::object_path(const fs::path& dir, const std::string& key) const {
  return dir / (key + extension_);
}

std::optional<std::string> KernelDiskCache::find(const std::string& key, const std::string& key_material) const {
  const std::optional<fs::path> dir = directory();
  if (!dir) return std::nullopt;
  const fs::path file = object_path(*dir, key), meta_file = *dir / (key + ".meta");
  std::error_code ec;
  if (!fs::exists(meta_file, ec) && !fs::exists(file, ec)) {
    if (trace_enabled()) trace_event("cache", {{"cache", "disk"}, {"result", "miss"}, {"key", key}});
    return std::nullopt;
  }
  for (const fs::path& f : {file, meta_file})
    if (std::optional<std::string> why = untrusted_entry_file(f)) {
      KILN_LOG(LogChannel::Cache, "not using the cache entry {}: {}", file.string(), *why);
      return std::nullopt;  // not ours to delete either
    }
  auto entry = read_entry(file, meta_file, key_material);
  if (entry.index() != 0) {
    discard(key, std::get<1>(entry));
    return std::nullopt;
  }
  fs::last_write_time(meta_file, fs::file_time_type::clock::now(), ec);  // least recently used order
  KILN_LOG(LogChannel::Cache, "disk hit {}", file.string());
  if (trace_enabled()) trace_event("cache", {{"cache", "disk"}, {"result", "hit"}, {"key", key}});
  return std::get<0>(std::move(entry));
}

void KernelDiskCache::discard(const std::string& key, const std::string& why) const {
  const std::optional<fs::path> dir = directory();
  if (!dir) return;
  std::error_code ec;
  const fs::path file = object_path(*dir, key);
  fs::remove(*dir / (key + ".meta"), ec);
  fs::remove(file, ec);
  KILN_LOG(LogChannel::Cache, "discarding the cache entry {}: {}; rebuilding it", file.string(), why);
}

// The object first, then the .meta that makes it an entry; each written atomically (files.h).
void KernelDiskCache::store(const std::string& key, const std::string& key_material, const std::string& object,
                            const std::string& what) const {
  const std::optional<fs::path> trusted = directory();
  if (!trusted) return;
  const fs::path& dir = *trusted;
  const fs::path file = object_path(dir, key), meta_file = dir / (key + ".meta");
  bool object_written = false;
  try {
    create_private_directory(dir);
    write_file_atomic(file.string(), object, 0600);
    object_written = true;
    const std::string meta = entry_meta(key_material, object);
    write_file_atomic(meta_file.string(), meta, 0600);
    KILN_LOG(LogChannel::Cache, "miss: compiled {} and stored {}", what, file.string());
    account_stored_entry(dir, int64_t(object.size() + meta.size()));
  } catch (const Error& e) {
    // An object without its .meta is no entry: eviction never counts or deletes it (it goes by .meta files),
    // and only a later lookup of the same key would, so left behind (a full disk) it could stay forever.
    // Unless another process completed the same entry meanwhile (a regular .meta is there), the object goes.
    std::error_code ec;
    if (object_written && !fs::is_regular_file(fs::symlink_status(meta_file, ec))) fs::remove(file, ec);
    KILN_LOG(LogChannel::Cache, "cannot store {} in the disk cache: {}{}", what, e.what(),
             object_written ? "; the object is removed" : "");
  }
}

// A temporary file of write_file_atomic (".KEY.o.kiln-tmp.PID.N") for an entry, whose writer no longer runs.
bool KernelDiskCache::is_abandoned_temp_file(const fs::path& p) const {
  const std::string name = p.filename().string();
  const size_t tmp = name.find(".kiln-tmp.");
  if (name.empty() || name[0] != '.' || tmp == std::string::npos) return false;
  const fs::path entry = name.substr(1, tmp - 1);
  if (!is_entry_stem(entry.stem().string()) || (entry.extension() != extension_ && entry.extension() != ".meta"))
    return false;
  const std::string rest = name.substr(tmp + 10);
  std::optional<int> pid = parse_number<int>(std::string_view(rest).substr(0, rest.find('.')));
  return pid && *pid > 0 && ::kill(*pid, 0) != 0 && errno == ESRCH;
}

// Keeps the cache directory under KILN_CACHE_SIZE_LIMIT by deleting the least recently used entries. Only kiln's
// own entries count and are deleted (see read_entry): other files in the directory are left alone. Returns the
// bytes of kiln's entries left.
int64_t KernelDiskCache::evict(const fs::path& dir) const {
  const int64_t limit = opt_int(Opt::CacheSizeLimit);
  struct Entry {
    fs::file_time_type time;
    fs::path object, meta;
    int64_t bytes;
    bool operator<(const Entry& o) const { return time < o.time; }
  };
  std::vector<Entry> entries;
  int64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (is_abandoned_temp_file(e.path())) {
      fs::remove(e.path(), ec);
      KILN_LOG(LogChannel::Cache, "removed {}, left by a writer that is gone", e.path().string());
      continue;
    }
    const fs::path meta = e.path();
    if (meta.extension() != ".meta" || !is_entry_stem(meta.stem().string()) || !e.is_regular_file(ec)) continue;
    char head[kEntryMagic.size()];
    std::ifstream in(meta, std::ios::binary);
    if (!in.read(head, sizeof head) || std::string_view(head, sizeof head) != kEntryMagic) continue;
    fs::path object = fs::path(meta).replace_extension(extension_);
    int64_t bytes = int64_t(e.file_size(ec)) + int64_t(fs::file_size(object, ec));
    if (ec) bytes = int64_t(e.file_size(ec));
    total += bytes;
    entries.push_back({e.last_write_time(ec), object, meta, bytes});
  }
  if (total <= limit) return total;
  std::sort(entries.begin(), entries.end());
  for (const Entry& e : entries) {
    if (total <= limit) break;
    fs::remove(e.object, ec);
    if (fs::remove(e.meta, ec)) {
      total -= e.bytes;
      KILN_LOG(LogChannel::Cache, "evict {} ({} bytes; cache over its {} byte limit)", e.object.string(), e.bytes, limit);
    }
  }
  return total;
}

namespace {
// The bytes of every regular file in `dir`: one directory listing, no file opened. At least what kiln's
// entries hold (foreign files count too, so at worst evict scans a little early).
int64_t bytes_in_directory(const fs::path& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file(ec)) total += int64_t(e.file_size(ec));
  return total;
}
}  // namespace

// What the disk cache holds, as this process knows it: per directory, its bytes when this process first stored
// there (bytes_in_directory) or at evict's last scan, plus what this process stored since. evict, which reads
// every entry's .meta, runs only when that estimate passes KILN_CACHE_SIZE_LIMIT, not after every store: with
// tens of thousands of entries a scan per compiled kernel cost more than compiling it (kiln fuzz; the graph
// fuzzer hit libFuzzer's 5 s timeout in it). Other processes' stores count from the next listing or scan (the
// cache is best effort).
void KernelDiskCache::account_stored_entry(const fs::path& dir, int64_t bytes) const {
  static std::mutex mutex;  // the CPU and CUDA backends store from their own locks
  static std::map<std::string, int64_t> known_bytes;
  std::lock_guard lock(mutex);
  auto [it, first] = known_bytes.try_emplace(dir.string(), 0);
  it->second = first ? bytes_in_directory(dir) : it->second + bytes;
  if (it->second > opt_int(Opt::CacheSizeLimit)) it->second = evict(dir);
}

}  // namespace kiln::inductor
