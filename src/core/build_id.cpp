// Reads the GNU build ID (the NT_GNU_BUILD_ID note, written by `ld --build-id`) of the loaded object that holds
// this function, through dl_iterate_phdr: no file is opened, so it costs microseconds once per process.
#include "core/build_id.h"

#include <elf.h>
#include <link.h>

#include <cstdint>
#include <cstring>

#include "kiln_version.h"

namespace kiln {
namespace {

struct Search {
  uintptr_t address;   // an address inside the object we want
  std::string id_hex;  // filled when found
};

size_t align4(size_t n) { return (n + 3) & ~size_t(3); }

// The build ID note among an object's PT_NOTE segments, as hex; "" when it has none.
std::string build_id_of(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* at = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = at + ph.p_memsz;
    while (at + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) note;
      std::memcpy(&note, at, sizeof note);
      const char* name = at + sizeof note;
      const char* desc = name + align4(note.n_namesz);
      if (desc + note.n_descsz > end) break;
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        static const char kHex[] = "0123456789abcdef";
        std::string hex;
        for (size_t k = 0; k < note.n_descsz; ++k) {
          const auto byte = static_cast<unsigned char>(desc[k]);
          hex += kHex[byte >> 4];
          hex += kHex[byte & 15];
        }
        return hex;
      }
      at = desc + align4(note.n_descsz);
    }
  }
  return "";
}

int visit(dl_phdr_info* info, size_t, void* data) {
  auto* s = static_cast<Search*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    if (s->address >= begin && s->address < begin + ph.p_memsz) {
      s->id_hex = build_id_of(info);
      return 1;  // this object holds the address: stop
    }
  }
  return 0;
}

}  // namespace

const std::string& build_identity() {
  static const std::string identity = [] {
    Search s{reinterpret_cast<uintptr_t>(&build_identity), ""};
    dl_iterate_phdr(visit, &s);
    if (!s.id_hex.empty()) return "build-id " + s.id_hex;
    return std::string("git ") + KILN_GIT_HASH + " built " + __DATE__ + " " + __TIME__;
  }();
  return identity;
}

}  // namespace kiln
