// Checked reading, atomic writing, output locks and path confinement (see files.h).
#include "core/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

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

}  // namespace

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

void write_file_atomic(const std::string& path, const std::function<void(const ChunkWriter&)>& produce) {
  struct stat existing {};
  bool exists = false;
  const fs::path target = write_target(path, existing, exists);
  static std::atomic<uint64_t> counter{0};
  fs::path dir = target.parent_path();
  const fs::path tmp = dir / fmt::format(".{}.kiln-tmp.{}.{}", target.filename().string(), ::getpid(), counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);  // the umask applies
  KILN_CHECK(fd >= 0, "{}: cannot create the file ({}); check that the directory exists and is writable", path,
             std::strerror(errno));
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

void write_file_atomic(const std::string& path, std::string_view contents) {
  write_file_atomic(path, [&](const ChunkWriter& write) { write(contents.data(), contents.size()); });
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
      ::close(fd_);
      fd_ = -1;
      KILN_CHECK(err != EWOULDBLOCK, "{}: another kiln process is writing it (it holds {}); wait for it to finish "
                 "or name another output", output, lock_path_);
      fail("{}: cannot lock {} ({})", output, lock_path_, std::strerror(err));
    }
    struct stat held, now;
    if (::fstat(fd_, &held) == 0 && ::stat(lock_path_.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
        held.st_dev == now.st_dev)
      return;
    ::close(fd_);
    fd_ = -1;
  }
  fail("{}: cannot lock {}: it keeps being replaced", output, lock_path_);
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
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
