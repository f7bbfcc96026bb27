// Checked reading, atomic writing, output locks, removal on signals and path confinement (see files.h).
#include "core/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>

#include "core/error.h"
#include "core/hash.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

std::string_view file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symlink";
  return "not a regular file";
}

std::string byte_size(int64_t n) {
  if (n >= (int64_t(1) << 30) && n % (int64_t(1) << 30) == 0) return fmt::format("{} GiB", n >> 30);
  if (n >= (int64_t(1) << 20) && n % (int64_t(1) << 20) == 0) return fmt::format("{} MiB", n >> 20);
  return fmt::format("{} bytes", n);
}

// Writes all of [data, data + n) to fd; false on an error (errno set).
bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

// The file an atomic write of `path` replaces: `path` itself, or the regular file its symlinks lead to.
// Sets `existing` when that file exists.
fs::path write_target(const std::string& path, struct stat& existing, bool& exists) {
  fs::path target = path;
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    std::error_code ec;
    target = fs::canonical(path, ec);
    KILN_CHECK(!ec, "{}: a symlink that leads nowhere ({}); kiln writes through a symlink only to an existing file",
               path, ec.message());
  }
  exists = ::stat(target.c_str(), &existing) == 0;
  KILN_CHECK(!exists || S_ISREG(existing.st_mode), "{}: exists and is {}; kiln replaces only regular files: name "
             "another output path", path, file_kind(existing.st_mode));
  return target;
}

// ---- removal on SIGINT, SIGTERM, SIGHUP (RemoveOnSignal)

// The paths registered for removal. Fixed storage: the handler reads it without allocating or locking.
struct RemovalSlot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 armed
  std::atomic<pid_t> owner{0};
  char path[PATH_MAX];
};
constexpr int kRemovalSlots = 64;
RemovalSlot g_removal[kRemovalSlots];

// Removes `name` in the directory `dirfd`: a file or symlink itself, a directory with its contents (up to
// `depth` levels below). Only async-signal-safe calls (no allocation, no stdio); symlinks are never followed.
void remove_entry_signal_safe(int dirfd, const char* name, int depth) {
  if (::unlinkat(dirfd, name, 0) == 0 || errno == ENOENT || errno != EISDIR || depth < 0) return;
  int fd = ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  alignas(8) char buf[2048];
  // Entries removed while the directory is read may shift the rest: read it again until nothing is left.
  for (int pass = 0; pass < 64; ++pass) {
    bool removed = false;
    ::lseek(fd, 0, SEEK_SET);
    for (ssize_t n; (n = ::getdents64(fd, buf, sizeof buf)) > 0;)
      for (ssize_t off = 0; off < n;) {
        const auto* d = reinterpret_cast<const struct dirent64*>(buf + off);
        off += d->d_reclen;
        const char* e = d->d_name;
        if (e[0] == '.' && (e[1] == '\0' || (e[1] == '.' && e[2] == '\0'))) continue;
        remove_entry_signal_safe(fd, e, depth - 1);
        removed = true;
      }
    if (!removed) break;
  }
  ::close(fd);
  ::unlinkat(dirfd, name, AT_REMOVEDIR);
}

void remove_registered_paths(int sig) {
  const pid_t self = ::getpid();
  for (RemovalSlot& s : g_removal)
    if (s.state.load(std::memory_order_acquire) == 2 && s.owner.load(std::memory_order_relaxed) == self)
      remove_entry_signal_safe(AT_FDCWD, s.path, 16);
  // SA_RESETHAND restored the default action: raised again, the signal ends the process as it would have.
  ::raise(sig);
}

void install_removal_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old {};
      // A signal the program ignores (nohup, a background job's SIGINT) or handles itself stays so.
      if (::sigaction(sig, nullptr, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
      struct sigaction sa {};
      sa.sa_handler = remove_registered_paths;
      sigemptyset(&sa.sa_mask);
      for (int other : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&sa.sa_mask, other);  // one cleanup at a time
      sa.sa_flags = SA_RESETHAND;
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

// ---- output locks

// This boot's id (/proc/sys/kernel/random/boot_id); "" where the kernel does not say.
const std::string& boot_id() {
  static const std::string id = [] {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string s;
    std::getline(in, s);
    return s;
  }();
  return id;
}

// The owner a lock file records ("pid N\nboot B\n"); an empty file records none.
struct LockRecord {
  std::optional<pid_t> pid;
  std::string boot;
  bool empty = true;
};

LockRecord read_lock_record(int fd) {
  char buf[256];
  ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  LockRecord r;
  if (n <= 0) return r;
  r.empty = false;
  std::string_view text(buf, size_t(n));
  while (!text.empty()) {
    std::string_view line = text.substr(0, text.find('\n'));
    text.remove_prefix(std::min(text.size(), line.size() + 1));
    if (line.starts_with("pid ")) {
      std::optional<pid_t> pid = parse_number<pid_t>(line.substr(4));
      if (pid && *pid > 0) r.pid = pid;
    } else if (line.starts_with("boot ")) {
      r.boot = std::string(line.substr(5));
    }
  }
  return r;
}

// "process 123" / "a process" for messages.
std::string owner_name(const LockRecord& r) { return r.pid ? fmt::format("process {}", *r.pid) : "a process"; }

// Why the lock file a process left is stale, for the note when it is taken over (this process holds its lock,
// so the process that wrote it does not).
std::string why_stale(const LockRecord& r) {
  if (!r.pid) return "which ended without removing it";
  if (!r.boot.empty() && !boot_id().empty() && r.boot != boot_id()) return "before the machine restarted";
  if (::kill(*r.pid, 0) != 0 && errno == ESRCH) return "which ended without removing it (killed?)";
  return "which no longer holds it (that process id now belongs to another process)";
}

}  // namespace

RemoveOnSignal::RemoveOnSignal(const std::string& path) {
  std::error_code ec;
  const std::string full = fs::absolute(path, ec).string();  // the handler must not depend on the directory
  if (ec || full.size() >= PATH_MAX) return;
  install_removal_handlers();
  for (int i = 0; i < kRemovalSlots; ++i) {
    int expected = 0;
    if (!g_removal[i].state.compare_exchange_strong(expected, 1)) continue;
    std::memcpy(g_removal[i].path, full.c_str(), full.size() + 1);
    g_removal[i].owner.store(::getpid(), std::memory_order_relaxed);
    g_removal[i].state.store(2, std::memory_order_release);
    slot_ = i;
    return;
  }
  // All slots taken (more than 64 outputs and temporary directories at once): this path is left to its owner.
}

RemoveOnSignal::~RemoveOnSignal() {
  if (slot_ >= 0) g_removal[slot_].state.store(0, std::memory_order_release);
}

TempDirectory::TempDirectory(const std::string& parent, const std::string& prefix) {
  std::string tmpl = ((parent.empty() ? fs::temp_directory_path() : fs::path(parent)) / (prefix + "XXXXXX")).string();
  KILN_CHECK(::mkdtemp(tmpl.data()) != nullptr, "cannot create a temporary directory {}: {}", tmpl,
             std::strerror(errno));
  path_ = tmpl;
  on_signal_.emplace(path_.string());
}

TempDirectory::~TempDirectory() {
  on_signal_.reset();
  std::error_code ec;
  fs::remove_all(path_, ec);
}

InputFile::InputFile(const std::string& path, std::string_view what, int64_t max_bytes) : path_(path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  KILN_CHECK(fd_ >= 0, "{}: cannot open the file ({}); check the path", path, std::strerror(errno));
  struct stat st;
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    std::string kind = ::fstat(fd_, &st) == 0 ? std::string(file_kind(st.st_mode)) : std::strerror(errno);
    ::close(fd_);
    fail("{}: is {}, not a {}; kiln reads {}s from regular files only", path, kind, what, what);
  }
  size_ = int64_t(st.st_size);
  if (size_ > max_bytes) {
    ::close(fd_);
    fail("{}: the file has {} bytes, more than the {} a {} may have (docs/cli.md, Input files)", path, size_,
         byte_size(max_bytes), what);
  }
  int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

int64_t InputFile::read(void* buf, int64_t n) {
  char* p = static_cast<char*>(buf);
  int64_t done = 0;
  while (done < n) {
    ssize_t r = ::read(fd_, p + done, size_t(n - done));
    if (r < 0 && errno == EINTR) continue;
    KILN_CHECK(r >= 0, "{}: reading the file failed ({})", path_, std::strerror(errno));
    if (r == 0) break;
    done += r;
  }
  return done;
}

std::string InputFile::read_all() {
  std::string out(size_t(size_), '\0');
  out.resize(size_t(read(out.data(), size_)));
  // A file that grew since it was opened: the rest is refused rather than read without a limit.
  char extra;
  KILN_CHECK(read(&extra, 1) == 0, "{}: the file grew while it was read; read it again when it is complete", path_);
  return out;
}

std::string read_input_file(const std::string& path, std::string_view what, int64_t max_bytes) {
  return InputFile(path, what, max_bytes).read_all();
}

void write_file_atomic(const std::string& path, const std::function<void(const ChunkWriter&)>& produce,
                       unsigned create_mode) {
  struct stat existing {};
  bool exists = false;
  const fs::path target = write_target(path, existing, exists);
  static std::atomic<uint64_t> counter{0};
  fs::path dir = target.parent_path();
  const fs::path tmp = dir / fmt::format(".{}.kiln-tmp.{}.{}", target.filename().string(), ::getpid(), counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, create_mode);  // the umask applies
  KILN_CHECK(fd >= 0, "{}: cannot create the file ({}); check that the directory exists and is writable", path,
             std::strerror(errno));
  RemoveOnSignal tmp_on_signal(tmp.string());  // an interrupted write leaves no temporary file
  auto abandon = [&](const std::string& why) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    fail("{}: writing the file failed ({}); the file is unchanged", path, why);
  };
  if (exists) {
    if (::fchmod(fd, existing.st_mode & 07777) != 0) abandon(std::string("keeping its mode: ") + std::strerror(errno));
    if (::geteuid() == 0) (void)!::fchown(fd, existing.st_uid, existing.st_gid);
  }
  try {
    produce([&](const void* data, size_t n) {
      if (!write_all(fd, data, n)) throw Error(std::strerror(errno));
    });
  } catch (const std::exception& e) {
    abandon(e.what());
  }
  if (::fsync(fd) != 0) abandon(std::strerror(errno));
  int closed = ::close(fd);
  fd = -1;
  if (closed != 0) abandon(std::strerror(errno));
  if (::rename(tmp.c_str(), target.c_str()) != 0) abandon(std::string("replacing it: ") + std::strerror(errno));
  // The rename itself survives a crash once the directory is on disk.
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

void write_file_atomic(const std::string& path, std::string_view contents, unsigned create_mode) {
  write_file_atomic(path, [&](const ChunkWriter& write) { write(contents.data(), contents.size()); }, create_mode);
}

void rewrite_file_in_place(const std::string& path, std::string_view contents) {
  struct stat existing {};
  bool exists = false;
  const fs::path target = write_target(path, existing, exists);
  if (!exists || existing.st_nlink <= 1) return write_file_atomic(path, contents);
  int fd = ::open(target.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  KILN_CHECK(fd >= 0, "{}: cannot open the file for writing ({})", path, std::strerror(errno));
  auto refuse = [&](const std::string& why) {
    ::close(fd);
    fail("{}: cannot rewrite the file ({}); the file is unchanged", path, why);
  };
  struct stat now {};
  if (::fstat(fd, &now) != 0 || now.st_ino != existing.st_ino || now.st_dev != existing.st_dev)
    refuse("it was replaced while kiln read it");
  const off_t size = off_t(contents.size());
  // The kernel refuses a file beyond the size limit only as the write passes it, after part of the file was
  // overwritten: refuse before writing instead.
  struct rlimit fsize {};
  if (::getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY && rlim_t(size) > fsize.rlim_cur)
    refuse(fmt::format("{} bytes, more than the file size limit of {} bytes (ulimit -f)", size, fsize.rlim_cur));
  // Reserves the blocks without changing the file, so the write below cannot run out of space part-way.
  // Filesystems that cannot reserve (EOPNOTSUPP) are written without.
  if (size > 0 && ::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, size) != 0 && errno != EOPNOTSUPP)
    refuse(fmt::format("reserving {} bytes for it: {}", size, std::strerror(errno)));
  const char* p = contents.data();
  for (off_t off = 0; off < size;) {
    ssize_t w = ::pwrite(fd, p + off, size_t(size - off), off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int err = w < 0 ? errno : EIO;
      ::close(fd);
      fail("{}: writing the file failed part-way ({}); the file may be damaged: restore it from version control "
           "or a backup", path, std::strerror(err));
    }
    off += w;
  }
  if (::ftruncate(fd, size) != 0 || ::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail("{}: writing the file failed ({}); check its content", path, std::strerror(err));
  }
  ::close(fd);
}

void check_output_path(const std::string& path) {
  struct stat existing {};
  bool exists = false;
  write_target(path, existing, exists);
}

void create_output_directory(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  const bool not_a_directory = fs::exists(dir) && !fs::is_directory(dir);
  KILN_CHECK(fs::is_directory(dir), "{}: cannot use it as an output directory ({}); name a directory or a path "
             "that does not exist yet", dir, not_a_directory || !ec ? "it exists and is not a directory" : ec.message());
}

OutputLock::OutputLock(const std::string& output) : lock_path_(output + ".lock") {
  // Retried when the lock file was removed (by the holder releasing it) between opening and locking it.
  for (int attempt = 0; attempt < 100; ++attempt) {
    fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    KILN_CHECK(fd_ >= 0, "{}: cannot create the lock file ({})", lock_path_, std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      const LockRecord holder = read_lock_record(fd_);
      ::close(fd_);
      fd_ = -1;
      KILN_CHECK(err != EWOULDBLOCK, "{}: another kiln process is writing it ({} holds {}); wait for it to finish "
                 "or name another output", output, holder.pid ? owner_name(holder) : "it", lock_path_);
      fail("{}: cannot lock {} ({})", output, lock_path_, std::strerror(err));
    }
    struct stat held, now;
    if (::fstat(fd_, &held) == 0 && ::stat(lock_path_.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
        held.st_dev == now.st_dev)
      break;
    ::close(fd_);
    fd_ = -1;
  }
  KILN_CHECK(fd_ >= 0, "{}: cannot lock {}: it keeps being replaced", output, lock_path_);
  on_signal_.emplace(lock_path_);
  // A record left in the file: its writer never released the lock (a holder removes the file first).
  if (const LockRecord left = read_lock_record(fd_); !left.empty)
    std::fprintf(stderr, "kiln: note: %s was left by %s, %s; taking it over\n", lock_path_.c_str(),
                 owner_name(left).c_str(), why_stale(left).c_str());
  const std::string record = fmt::format("pid {}\nboot {}\n", ::getpid(), boot_id());
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, record.data(), record.size(), 0) != ssize_t(record.size()))
    std::fprintf(stderr, "kiln: note: cannot record the owner in %s (%s)\n", lock_path_.c_str(), std::strerror(errno));
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  on_signal_.reset();  // first: a signal now must not remove a lock file another process made after ours
  ::unlink(lock_path_.c_str());
  ::close(fd_);
}

fs::path confined_path(const fs::path& base_dir, std::string_view relative, std::string_view what) {
  const fs::path rel(relative);
  KILN_CHECK(!relative.empty(), "{}: the path is empty", what);
  KILN_CHECK(!rel.is_absolute(), "{} \"{}\" is an absolute path; paths in a file must be relative to the file's "
             "directory and stay inside it", what, relative);
  for (const fs::path& part : rel)
    KILN_CHECK(part != "..", "{} \"{}\" leaves the file's directory ('..'); paths in a file must stay inside the "
               "file's directory", what, relative);
  const fs::path base = base_dir.empty() ? fs::path(".") : base_dir;
  const fs::path full = base / rel;
  std::error_code ec;
  const fs::path real_base = fs::weakly_canonical(base, ec);
  const fs::path real_full = fs::weakly_canonical(full, ec);
  auto [b, f] = std::mismatch(real_base.begin(), real_base.end(), real_full.begin(), real_full.end());
  KILN_CHECK(b == real_base.end(), "{} \"{}\" leads outside the file's directory through a symlink (to {}); paths "
             "in a file must stay inside the file's directory", what, relative, real_full.string());
  return full;
}

const std::vector<std::string>& process_argv() {
  static const std::vector<std::string> words = [] {
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::string> out;
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\0', start);
      if (end == std::string::npos) end = text.size();
      out.push_back(text.substr(start, end - start));
      start = end + 1;
    }
    return out;
  }();
  return words;
}

std::string safe_file_stem(std::string_view name) {
  constexpr size_t kMaxStem = 150;
  auto kept = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
  };
  if (name.empty()) return "%";  // never produced otherwise: '%' is always followed by two hex digits
  std::string stem;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (kept(c) && !(i == 0 && c == '.')) stem += c;
    else stem += fmt::format("%{:02X}", static_cast<unsigned char>(c));
  }
  if (stem.size() > kMaxStem) stem = stem.substr(0, kMaxStem) + "~" + sha256_hex(name);
  return stem;
}

}  // namespace kiln
