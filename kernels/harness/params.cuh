#pragma once
// Parameters of the harness kernels, shared verbatim with the host (plain C++).
namespace tc::harness {

struct StreamParams {
  const void* src;       // 16-byte words
  void* dst;
  unsigned long long n;  // number of 16-byte words
  unsigned int* sink;    // written only if the checksum hits an impossible value
};

struct FillParams {
  void* out;
  unsigned long long n;
  unsigned long long seed, stream;
  float lo, range;
};

}  // namespace tc::harness
