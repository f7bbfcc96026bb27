// SHA-256 through LLVM's implementation (see hash.h).
#include "core/hash.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/Support/SHA256.h>

#include <fmt/format.h>

namespace kiln {

struct Sha256::Impl {
  llvm::SHA256 h;
};

Sha256::Sha256() : impl_(new Impl) {}
Sha256::~Sha256() { delete impl_; }

void Sha256::update(const void* data, size_t n) {
  impl_->h.update(llvm::ArrayRef<uint8_t>(static_cast<const uint8_t*>(data), n));
}

Sha256Digest Sha256::digest() { return impl_->h.final(); }

Sha256Digest sha256(const void* data, size_t n) {
  Sha256 h;
  h.update(data, n);
  return h.digest();
}

std::string to_hex(const Sha256Digest& d) {
  std::string out;
  out.reserve(64);
  for (uint8_t b : d) out += fmt::format("{:02x}", b);
  return out;
}

}  // namespace kiln
