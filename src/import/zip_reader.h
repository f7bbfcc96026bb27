// Reads the entries of a zip archive (a torch.export .pt2 file) as untrusted input, through minizip: the
// archive is a regular file within a size limit, every entry name is a relative path without '..', '\' or
// empty components (an archive with any other name is refused whole), and an entry is read only up to a
// limit, with its length and CRC checked, so a truncated or tampered archive is an error, never a short read.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace kiln::importer {

// Limits on what an archive may make kiln read (docs/import.md, Limits).
inline constexpr int64_t kMaxArchiveBytes = int64_t(64) << 30;
inline constexpr int64_t kMaxArchiveEntries = 1 << 20;

class ZipReader {
 public:
  // Opens `path` and reads its directory; throws kiln::Error (naming the file) for a missing, non-regular,
  // oversized, truncated or malformed archive, and for an entry name that is not a safe relative path.
  explicit ZipReader(const std::string& path);
  ~ZipReader();
  ZipReader(const ZipReader&) = delete;
  ZipReader& operator=(const ZipReader&) = delete;

  const std::string& path() const { return path_; }
  // Entry name -> uncompressed size, as the archive's directory records them.
  const std::map<std::string, uint64_t>& entries() const { return entries_; }
  bool contains(const std::string& name) const { return entries_.count(name) > 0; }
  // The whole entry; throws when it is absent, larger than `max_bytes`, shorter than recorded or fails its CRC.
  std::string read(const std::string& name, int64_t max_bytes) const;

 private:
  std::string path_;
  void* zip_ = nullptr;  // minizip's unzFile
  std::map<std::string, uint64_t> entries_;
};

// Whether `name` is a safe relative entry name (see ZipReader); the reason it is not, else empty.
std::string unsafe_entry_name_reason(std::string_view name);

}  // namespace kiln::importer
