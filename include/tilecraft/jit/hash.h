#pragma once
// SHA-256 for cache keys: collisions between different kernels must not happen
// in practice, and the key must be stable across processes and machines.
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
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

std::string sha256_hex(std::string_view data);

}  // namespace tilecraft::jit
