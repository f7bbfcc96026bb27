// SHA-256, the one content hash kiln records and checks (npy constants in .kir files, kernel cache entries,
// repro input files). A thin wrapper over LLVM's implementation (llvm/Support/SHA256.h).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

using Sha256Digest = std::array<uint8_t, 32>;

// Incremental hashing, for data that arrives in pieces.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t n);
  void update(std::string_view s) { update(s.data(), s.size()); }
  Sha256Digest digest();  // once; the object is spent afterwards

 private:
  struct Impl;
  Impl* impl_;
};

Sha256Digest sha256(const void* data, size_t n);
inline Sha256Digest sha256(std::string_view s) { return sha256(s.data(), s.size()); }
std::string to_hex(const Sha256Digest& d);  // 64 lowercase hex digits
inline std::string sha256_hex(std::string_view s) { return to_hex(sha256(s)); }
inline std::string sha256_hex(const void* data, size_t n) { return to_hex(sha256(data, n)); }

}  // namespace kiln
