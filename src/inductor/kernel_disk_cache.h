// The on-disk half of every backend's kernel cache (the CPU's objects, the CUDA backend's cubins): one
// directory of verified entries per backend and code-generator version under KILN_CACHE_DIR, written atomically
// so concurrent processes can share it, kept under KILN_CACHE_SIZE_LIMIT by least-recently-used eviction.
// Backends derive the key (a SHA-256 of the key material: the kernel's text, the target, versions) and keep
// their own in-memory index; the file format, verification and eviction are here, in one place.
//
// Trust: a cache entry is machine code the process runs, so the cache is used only in a directory no other user
// can write. The root is KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln, else the passwd
// entry's home directory/.cache/kiln; never a shared path such as /tmp. The directory and every directory above
// it must be owned by this user or root and writable by no one else (a sticky directory such as /tmp may stand
// above it, as ssh and git allow; group write is no one else's when the group is private to this user, the
// user-private groups and umask 002 of Debian and Ubuntu), and each entry file must be a regular file owned by
// this user or root and writable by no one else; otherwise the disk cache is off for the process, with one
// warning naming the directory and the fix. Entries are written mode 0600 whatever the umask.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace kiln::inductor {

class KernelDiskCache {
 public:
  // Entries live in <cache root>/`subdirectory` ("kernels-v24") as KEY`extension` (".o", ".cubin") + KEY.meta.
  KernelDiskCache(std::string subdirectory, std::string extension);

  // The cache directory (read when asked: tests change KILN_CACHE_DIR), or nullopt when there is none this
  // process may trust (no root found, or one another user could write: see Trust above).
  std::optional<std::filesystem::path> directory() const;

  // The object stored under `key` for exactly `key_material`, verified (size, SHA-256, no collision), or nullopt
  // when there is none; an unusable entry is discarded with its reason on KILN_LOGS=cache. A hit refreshes the
  // entry's place in the eviction order.
  std::optional<std::string> find(const std::string& key, const std::string& key_material) const;
  // Removes the entry (a caller that cannot use a verified object: the CPU JIT failing to link it).
  void discard(const std::string& key, const std::string& why) const;
  // Stores the entry, best effort (an unwritable directory only costs the next process a compile); evicts when
  // this process's estimate of the directory's bytes passes the limit (account_stored_entry).
  void store(const std::string& key, const std::string& key_material, const std::string& object,
             const std::string& what) const;

 private:
  std::string subdirectory_, extension_;
  std::filesystem::path object_path(const std::filesystem::path& dir, const std::string& key) const;
  int64_t evict(const std::filesystem::path& dir) const;  // returns the bytes of kiln's entries left
  void account_stored_entry(const std::filesystem::path& dir, int64_t bytes) const;
  bool is_abandoned_temp_file(const std::filesystem::path& p) const;
};

}  // namespace kiln::inductor
