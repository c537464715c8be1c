#pragma once
// SHA-256 for cache keys: collisions between different kernels must not happen
// in practice, and the key must be stable across processes and machines. Also
// the fingerprint of every output a test writes (gigabytes for the large
// cases): x86-64 CPUs with the SHA extensions hash through them (several
// times faster, the same digest).
#include <cstdint>
#include <string>
#include <string_view>

namespace tilecraft::jit {

class Sha256 {
 public:
  Sha256();
  Sha256& update(std::string_view data);
  // Adds a length-prefixed field so ("ab","c") and ("a","bc") hash differently.
  Sha256& field(std::string_view data);
  std::string hex();  // finalizes

 private:
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

std::string sha256_hex(std::string_view data);

namespace detail {
// n whole 64-byte blocks into the state h, by the SHA extensions when
// `accelerated` (only where sha256_accelerated()), else portably.
void sha256_blocks(uint32_t h[8], const uint8_t* p, size_t n, bool accelerated);
bool sha256_accelerated();  // this CPU has the SHA extensions (and SSE4.1)
}  // namespace detail

}  // namespace tilecraft::jit
