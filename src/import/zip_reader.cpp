// ZipReader (zip_reader.h) over minizip's unzip API.
#include "import/zip_reader.h"

#include <unzip.h>

#include <vector>

#include "core/error.h"
#include "core/files.h"

namespace kiln::importer {

std::string unsafe_entry_name_reason(std::string_view name) {
  if (name.empty()) return "it is empty";
  if (name.find('\0') != std::string_view::npos) return "it contains a NUL byte";
  if (name.find('\\') != std::string_view::npos) return "it contains '\\'";
  if (name.front() == '/') return "it is an absolute path";
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string_view::npos) end = name.size();
    std::string_view part = name.substr(start, end - start);
    if (part == "..") return "it has a '..' component (it would escape the archive)";
    if (part.empty() && end != name.size()) return "it has an empty component";
    if (part == ".") return "it has a '.' component";
    start = end + 1;
  }
  return "";
}

ZipReader::ZipReader(const std::string& path) : path_(path) {
  { InputFile check(path, "archive", kMaxArchiveBytes); }  // a regular file within the limit, or an error
  zip_ = unzOpen64(path.c_str());
  KILN_CHECK(zip_, "{}: not a zip archive, or a truncated one (its central directory cannot be read); expected "
                   "a .pt2 file written by torch.export.save", path);
  // A refused archive throws from here, where the destructor does not run: close the handle on the way out.
  try {
    unz_global_info64 info{};
    KILN_CHECK(unzGetGlobalInfo64(zip_, &info) == UNZ_OK, "{}: cannot read the zip directory", path);
    KILN_CHECK(int64_t(info.number_entry) <= kMaxArchiveEntries, "{}: {} entries, more than the limit {}", path,
               info.number_entry, kMaxArchiveEntries);
    for (int rc = unzGoToFirstFile(zip_); rc != UNZ_END_OF_LIST_OF_FILE; rc = unzGoToNextFile(zip_)) {
      KILN_CHECK(rc == UNZ_OK, "{}: the zip directory is corrupt (entry {})", path, entries_.size());
      unz_file_info64 fi{};
      std::vector<char> name(65536);
      KILN_CHECK(unzGetCurrentFileInfo64(zip_, &fi, name.data(), uLong(name.size()), nullptr, 0, nullptr, 0) == UNZ_OK,
                 "{}: the zip directory is corrupt (entry {})", path, entries_.size());
      std::string entry(name.data(), std::min<size_t>(fi.size_filename, name.size() - 1));
      std::string why = unsafe_entry_name_reason(entry);
      KILN_CHECK(why.empty(), "{}: zip entry '{}' is refused: {}; an archive written by torch.export.save has only "
                              "relative names inside its own folder", path, entry, why);
      entries_[entry] = fi.uncompressed_size;
    }
  } catch (...) {
    unzClose(zip_);
    zip_ = nullptr;
    throw;
  }
}

ZipReader::~ZipReader() {
  if (zip_) unzClose(zip_);
}

std::string ZipReader::read(const std::string& name, int64_t max_bytes) const {
  auto it = entries_.find(name);
  KILN_CHECK(it != entries_.end(), "{}: the archive has no entry '{}'", path_, name);
  KILN_CHECK(it->second <= uint64_t(max_bytes), "{}: entry '{}' is {} bytes, more than the limit {}", path_, name,
             it->second, max_bytes);
  KILN_CHECK(unzLocateFile(zip_, name.c_str(), 1) == UNZ_OK && unzOpenCurrentFile(zip_) == UNZ_OK,
             "{}: cannot open entry '{}' (the archive is corrupt or truncated)", path_, name);
  // Grown as bytes arrive, so a directory that claims a huge size cannot make kiln allocate it up front.
  std::string data;
  data.reserve(size_t(std::min<uint64_t>(it->second, uint64_t(64) << 20)));
  std::vector<char> chunk(1 << 20);
  while (data.size() < it->second) {
    size_t want = size_t(std::min<uint64_t>(chunk.size(), it->second - data.size()));
    int n = unzReadCurrentFile(zip_, chunk.data(), unsigned(want));
    if (n <= 0) break;
    data.append(chunk.data(), size_t(n));
  }
  const size_t got = data.size();
  char extra;
  bool longer = got == it->second && unzReadCurrentFile(zip_, &extra, 1) > 0;
  int close = unzCloseCurrentFile(zip_);
  KILN_CHECK(got == it->second && !longer, "{}: entry '{}' has {} bytes where the archive records {} (a truncated "
                                           "or corrupt archive)", path_, name, longer ? "more" : std::to_string(got),
             it->second);
  KILN_CHECK(close != UNZ_CRCERROR, "{}: entry '{}' fails its CRC check (a corrupt archive)", path_, name);
  KILN_CHECK(close == UNZ_OK, "{}: cannot read entry '{}' (a corrupt archive)", path_, name);
  return data;
}

}  // namespace kiln::importer
