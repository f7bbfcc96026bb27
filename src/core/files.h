// The one place kiln touches files named by users or by files it reads (issue 22: files are untrusted input):
//   - reading: InputFile / read_input_file accept only regular files within a size limit (a directory, a
//     device such as /dev/zero or a FIFO is refused before anything is read);
//   - writing: write_file_atomic (temporary file + fsync + rename) never replaces what is not a regular file,
//     writes through a symlink to its target, keeps the mode of the file it replaces, and removes its
//     temporary file on failure; rewrite_file_in_place keeps a hard-linked file one file; OutputLock keeps two
//     processes from writing the same output and records its owner, so that a lock a killed process left is
//     taken over;
//   - leaving nothing behind: what a process is writing (locks, temporary files and directories) is removed
//     when SIGINT, SIGTERM or SIGHUP ends it (RemoveOnSignal, TempDirectory);
//   - paths inside files: confined_path keeps them inside the file's directory;
//   - numbers inside files: parse_number parses a whole field or says it cannot.
#pragma once
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>
#include <string_view>

namespace kiln {

// Size limits of files kiln reads (docs/cli.md, Input files). Text files: .kir graphs, repro files, JSON state.
inline constexpr int64_t kMaxTextFileBytes = int64_t(256) << 20;
// .npy tensors (inputs, outputs, constants).
inline constexpr int64_t kMaxNpyFileBytes = int64_t(64) << 30;

// An open regular file of at most `max_bytes`, for readers that stream (npy). `what` names the kind of file in
// errors ("graph file"). Throws kiln::Error for a missing or unreadable path, anything but a regular file, and
// files over the limit.
class InputFile {
 public:
  InputFile(const std::string& path, std::string_view what, int64_t max_bytes);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  int64_t size() const { return size_; }
  // Up to `n` bytes (fewer only at the end of the file).
  int64_t read(void* buf, int64_t n);
  std::string read_all();

 private:
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
};

// The whole content of a regular file of at most `max_bytes` (see InputFile).
std::string read_input_file(const std::string& path, std::string_view what, int64_t max_bytes = kMaxTextFileBytes);

// Writes a file atomically: the data goes to a temporary file beside the target, is fsync'ed, and is renamed
// over the target (the directory is fsync'ed too), so readers see the old file or the new one, never part of
// one. The target: `path`, or the file a symlink at `path` points to (the link stays a link). Refused when it
// exists and is not a regular file (a directory, /dev/null, a FIFO). A replaced file keeps its mode; a new one
// gets `create_mode` minus the umask (0666: a user's output; 0600: a private file such as a cache entry, which a
// umask of 002 must not make group-writable). On any failure the temporary file is removed and the target is
// untouched. `produce` writes the content through the function it is given.
using ChunkWriter = std::function<void(const void* data, size_t n)>;
void write_file_atomic(const std::string& path, const std::function<void(const ChunkWriter&)>& produce,
                       unsigned create_mode = 0666);
void write_file_atomic(const std::string& path, std::string_view contents, unsigned create_mode = 0666);

// Rewrites the existing file `path` with `contents` for an in-place edit (`kiln fmt -i`). A file with one name
// is replaced atomically (write_file_atomic). A file with hard links is written through its own inode, so that
// every name keeps sharing the new content (a rename would give `path` a new inode and leave the other names
// with the old text): the space is reserved first (posix_fallocate), so a full disk or a file size limit
// refuses the write with the file unchanged; only a crash or an I/O error in the middle of the write could
// leave it partial. The caller validates `contents` completely before calling.
void rewrite_file_in_place(const std::string& path, std::string_view contents);

// Refuses (kiln::Error) an output path write_file_atomic would refuse, before a long run gets there.
void check_output_path(const std::string& path);

// Creates `dir` (and parents) for kiln's outputs; refused when `dir` exists and is not a directory.
void create_output_directory(const std::string& dir);

// While alive, `path` (a file, or a directory with everything in it) is removed if SIGINT, SIGTERM or SIGHUP
// ends this process; the process then dies by that signal as it would have (a shell shows status 128 + N). The
// handler is installed at the first registration, for each of the three signals whose action is the default
// (one a program ignores or handles itself is left to it); it removes only what this process registered (a
// forked child removes nothing of its parent's) using async-signal-safe calls, never following a symlink.
// The destructor only unregisters: the owner removes the path itself when it is done.
class RemoveOnSignal {
 public:
  explicit RemoveOnSignal(const std::string& path);
  ~RemoveOnSignal();
  RemoveOnSignal(const RemoveOnSignal&) = delete;
  RemoveOnSignal& operator=(const RemoveOnSignal&) = delete;

 private:
  int slot_ = -1;
};

// A fresh, empty directory `prefix`XXXXXX under `parent` (empty: the system temp directory), removed with its
// contents when this object is destroyed or a signal ends the process (RemoveOnSignal).
class TempDirectory {
 public:
  TempDirectory(const std::string& parent, const std::string& prefix);
  ~TempDirectory();
  TempDirectory(const TempDirectory&) = delete;
  TempDirectory& operator=(const TempDirectory&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::optional<RemoveOnSignal> on_signal_;
};

// Held while a command writes `output` (a file or a directory): an exclusive lock (flock) on `output`.lock,
// which records its owner: "pid N" and "boot B" (/proc/sys/kernel/random/boot_id). A second process asking
// for the same output while the owner runs fails at once with an error naming it. The lock file is removed on
// release, and when SIGINT, SIGTERM or SIGHUP ends the owner (RemoveOnSignal). A lock file that a killed
// process left (SIGKILL, a crash, a power cut) is stale: its owner is not alive on this boot, so no process
// holds its lock (the kernel releases a dead process's locks, and a reboot all of them). It is taken over with
// a note on stderr naming the process that left it and whether it ended or ran before a reboot.
class OutputLock {
 public:
  explicit OutputLock(const std::string& output);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  std::string lock_path_;
  int fd_ = -1;
  std::optional<RemoveOnSignal> on_signal_;
};

// A path read from a file, resolved against the directory `base_dir` that file lies in. Refused (kiln::Error
// naming `what`): absolute paths, '..' components, and paths whose symlinks lead outside `base_dir`.
std::filesystem::path confined_path(const std::filesystem::path& base_dir, std::string_view relative,
                                    std::string_view what);

// `name` (a value or graph name from a file) as one file name component, injectively: letters, digits, '_', '-'
// and '.' stay, every other byte and a leading '.' become %HH (so no '/', no "..", no hidden file); an encoding
// longer than 150 bytes keeps that prefix and adds '~' and the SHA-256 of the name. Empty: "%".
std::string safe_file_stem(std::string_view name);

// This process's argv as /proc/self/cmdline holds it, read once (KILN_DEBUG_DIR's index and KILN_TRACE's header
// record it).
const std::vector<std::string>& process_argv();

// `text` as a number of type T when it is exactly one (no sign for unsigned types, no spaces, no trailing
// characters, in range); nullopt otherwise. For every number field of every file kiln reads.
template <class T>
std::optional<T> parse_number(std::string_view text) {
  T v{};
  if (text.empty() || text.front() == '+') return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace kiln
