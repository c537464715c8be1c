#include "tilecraft/jit/hash.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define TC_SHA_EXTENSIONS 1
#else
#define TC_SHA_EXTENSIONS 0
#endif

namespace tilecraft::jit {
namespace {
constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void blocks_portable(uint32_t* hs, const uint8_t* p, size_t n) {
  for (; n; --n, p += 64) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = uint32_t(p[4 * i]) << 24 | uint32_t(p[4 * i + 1]) << 16 | uint32_t(p[4 * i + 2]) << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = hs[0], b = hs[1], c = hs[2], d = hs[3], e = hs[4], f = hs[5], g = hs[6], h = hs[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    hs[0] += a; hs[1] += b; hs[2] += c; hs[3] += d; hs[4] += e; hs[5] += f; hs[6] += g; hs[7] += h;
  }
}

#if TC_SHA_EXTENSIONS
// The state lives in two registers as the instructions want it: (A, B, E, F)
// and (C, D, G, H), highest word first. Each sha256rnds2 runs two rounds and
// returns the new (A, B, E, F); the old one becomes (C, D, G, H).
__attribute__((target("sha,sse4.1"))) void blocks_sha_ni(uint32_t* hs, const uint8_t* p, size_t n) {
  const __m128i dcba = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hs));
  const __m128i hgfe = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hs + 4));
  const __m128i cdab = _mm_shuffle_epi32(dcba, 0xb1), efgh = _mm_shuffle_epi32(hgfe, 0x1b);
  __m128i abef = _mm_alignr_epi8(cdab, efgh, 8), cdgh = _mm_blend_epi16(efgh, cdab, 0xf0);
  // Big-endian message words: byte order reversed within each 32-bit word.
  const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bll, 0x0405060700010203ll);
  for (; n; --n, p += 64) {
    const __m128i abef0 = abef, cdgh0 = cdgh;
    __m128i m[4];  // m[g % 4]: message words 4g .. 4g + 3 of the last four groups
    for (int g = 0; g < 16; ++g) {
      if (g < 4) {
        m[g] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * g)), swap);
      } else {
        // W[t] = W[t-16] + s0(W[t-15]) + W[t-7] + s1(W[t-2]), four at a time:
        // msg1 the first two terms, the words t-7 from groups g-2 and g-1,
        // msg2 the last (two of its words from this group's own first two).
        __m128i t = _mm_sha256msg1_epu32(m[g % 4], m[(g + 1) % 4]);
        t = _mm_add_epi32(t, _mm_alignr_epi8(m[(g + 3) % 4], m[(g + 2) % 4], 4));
        m[g % 4] = _mm_sha256msg2_epu32(t, m[(g + 3) % 4]);
      }
      const __m128i k = _mm_add_epi32(m[g % 4], _mm_loadu_si128(reinterpret_cast<const __m128i*>(kRound + 4 * g)));
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, k);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(k, 0x0e));
    }
    abef = _mm_add_epi32(abef, abef0);
    cdgh = _mm_add_epi32(cdgh, cdgh0);
  }
  const __m128i feba = _mm_shuffle_epi32(abef, 0x1b), dchg = _mm_shuffle_epi32(cdgh, 0xb1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(hs), _mm_blend_epi16(feba, dchg, 0xf0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(hs + 4), _mm_alignr_epi8(dchg, feba, 8));
}
#endif
}  // namespace

namespace detail {
bool sha256_accelerated() {
#if TC_SHA_EXTENSIONS
  static const bool has = [] {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSE4_1) || !(c & bit_SSSE3)) return false;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
  }();
  return has;
#else
  return false;
#endif
}

void sha256_blocks(uint32_t h[8], const uint8_t* p, size_t n, bool accelerated) {
#if TC_SHA_EXTENSIONS
  if (accelerated) return blocks_sha_ni(h, p, n);
#endif
  (void)accelerated;
  blocks_portable(h, p, n);
}
}  // namespace detail

Sha256::Sha256()
    : h_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19} {}

Sha256& Sha256::update(std::string_view data) {
  const bool fast = detail::sha256_accelerated();
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  size_t n = data.size();
  total_ += n;
  if (buf_len_) {  // complete the buffered block first
    const size_t take = std::min(n, size_t(64) - buf_len_);
    if (take) std::memcpy(buf_ + buf_len_, p, take);
    buf_len_ += take, p += take, n -= take;
    if (buf_len_ < 64) return *this;
    detail::sha256_blocks(h_, buf_, 1, fast);
    buf_len_ = 0;
  }
  detail::sha256_blocks(h_, p, n / 64, fast);  // whole blocks straight from the input
  p += n / 64 * 64, n %= 64;
  if (n) std::memcpy(buf_, p, n);
  buf_len_ = n;
  return *this;
}

Sha256& Sha256::field(std::string_view data) {
  update(std::to_string(data.size()));
  update(":");
  return update(data);
}

std::string Sha256::hex() {
  uint64_t bits = total_ * 8;
  uint8_t pad = 0x80;
  update(std::string_view(reinterpret_cast<const char*>(&pad), 1));
  uint8_t zero = 0;
  while (buf_len_ != 56) update(std::string_view(reinterpret_cast<const char*>(&zero), 1));
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(bits >> (56 - 8 * i));
  update(std::string_view(reinterpret_cast<const char*>(len), 8));
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (uint32_t v : h_)
    for (int s = 28; s >= 0; s -= 4) out += digits[(v >> s) & 0xf];
  return out;
}

std::string sha256_hex(std::string_view data) { return Sha256().update(data).hex(); }

}  // namespace tilecraft::jit
