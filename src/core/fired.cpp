// The run-wide record of settings that fired (core/fired.h): a bit table in a shared anonymous mapping, made by a
// static initializer before main (so before any fork), and the warnings printed at exit by its maker.
#include "core/fired.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <new>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "core/options.h"

namespace kiln {
namespace {

constexpr size_t kWords = 1024;  // 32768 bits: a collision between two settings of one run is negligible

struct Table {
  std::atomic<uint32_t> read;
  std::atomic<uint32_t> bits[kWords];
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "the table is shared between processes");

uint64_t hash_of(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

void warn_at_exit();

struct Shared {
  Table* table = nullptr;
  pid_t owner = 0;
  Shared() {
    void* p = ::mmap(nullptr, sizeof(Table), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;  // then nothing is recorded and nothing warned: never wrong, only quiet
    table = new (p) Table{};
    owner = ::getpid();
  }
};

Shared& shared() {
  static Shared s;
  return s;
}
// Made before main: the first fork must already share it.
[[maybe_unused]] const bool g_made = (shared(), true);

// The entries of the settings in effect, as "NAME=entry": read from the environment itself, not through the
// options table, because this also runs from an atexit handler, after the table's override state (a static of
// core/options.cpp) may have been destroyed. The entries split as opt_list splits them (commas, spaces trimmed).
std::vector<std::string> settings_to_check() {
  std::vector<std::string> out;
  for (const char* name : {"KILN_INJECT", "KILN_BISECT_DISABLE", "KILN_BISECT_LIMIT"}) {
    const char* value = std::getenv(name);
    if (!value) continue;
    for (const std::string& entry : split_option_list(value)) out.push_back(fmt::format("{}={}", name, entry));
  }
  return out;
}

void warn_at_exit() { warn_unfired_settings(); }

}  // namespace

void note_setting_fired(std::string_view setting) {
  if (Table* t = shared().table) {
    const uint64_t h = hash_of(setting) % (kWords * 32);
    t->bits[h / 32].fetch_or(uint32_t(1) << (h % 32), std::memory_order_relaxed);
  }
}

void note_injection_fired(std::string_view target, std::string_view kind) {
  note_setting_fired(fmt::format("KILN_INJECT={}:{}", target, kind));
}

void note_settings_read() {
  Shared& s = shared();
  if (!s.table) return;
  s.table->read.store(1, std::memory_order_relaxed);
  // A program that reads the settings itself (not only in children) warns at exit too. Registered here, after
  // the options table's state exists, so it runs before that state is destroyed.
  static std::atomic<bool> decided{false};  // once per process (a forked child copies it: decided there as well)
  if (decided.load(std::memory_order_relaxed) || decided.exchange(true)) return;
  if (::getpid() == s.owner) std::atexit(warn_at_exit);
}

void warn_unfired_settings() {
  static std::atomic<bool> done{false};
  if (::getpid() != shared().owner || done.exchange(true)) return;
  try {
    for (const std::string& w : unfired_setting_warnings()) std::fprintf(stderr, "kiln: warning: %s\n", w.c_str());
  } catch (...) {  // a malformed setting was reported when it was read; nothing to add at the end
  }
}

bool setting_fired(std::string_view setting) {
  Table* t = shared().table;
  if (!t) return true;
  const uint64_t h = hash_of(setting) % (kWords * 32);
  return (t->bits[h / 32].load(std::memory_order_relaxed) >> (h % 32)) & 1;
}

std::vector<std::string> unfired_setting_warnings() {
  std::vector<std::string> out;
  Table* t = shared().table;
  if (!t || !t->read.load()) return out;
  for (const std::string& s : settings_to_check()) {
    if (setting_fired(s)) continue;
    out.push_back(s.rfind("KILN_INJECT=", 0) == 0
                      ? fmt::format("{} never fired in this run: no compile, trace or backend it ran injected that "
                                    "bug (does the graph have that op, and does the backend run the stage it breaks? "
                                    "docs/inductor.md, Bug injection)", s)
                      : fmt::format("{} changed nothing in this run: that site was never asked", s));
  }
  return out;
}

}  // namespace kiln
