#pragma once
// Register vectors and vectorized global access: N elements of T moved as one
// 1/2/4/8/16-byte transaction per thread.
#include "tile/target.cuh"
#include "tile/types.cuh"

namespace tc {

template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

namespace detail {
template <int BYTES> struct Raw;
template <> struct Raw<1> { using type = unsigned char; };
template <> struct Raw<2> { using type = unsigned short; };
template <> struct Raw<4> { using type = unsigned int; };
template <> struct Raw<8> { using type = uint2; };
template <> struct Raw<16> { using type = uint4; };
}  // namespace detail

// Streaming read of data used once: read-only path, no L1 allocation.
template <typename T, int N>
__device__ __forceinline__ Vec<T, N> load_stream(const T* p) {
  constexpr int kBytes = sizeof(T) * N;
  static_assert(kBytes <= Target::kVectorBytes, "vector wider than one access");
  Vec<T, N> out;
  if constexpr (kBytes == 16) {
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    *reinterpret_cast<uint4*>(&out) = r;
  } else if constexpr (kBytes == 8) {
    uint2 r;
    asm("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
    *reinterpret_cast<uint2*>(&out) = r;
  } else {
    using R = typename detail::Raw<kBytes>::type;
    *reinterpret_cast<R*>(&out) = __ldg(reinterpret_cast<const R*>(p));
  }
  return out;
}

// Predicated streaming read: zeros when !pred, and no memory access at all
// then (the address is not touched). Volatile so that a run of these issues in
// program order ahead of the arithmetic that consumes them: the compiler may
// not sink them next to their uses, which would leave one load in flight.
// L2_256B adds the L2 256-byte fetch hint to 16-byte loads.
template <typename T, int N, bool L2_256B = false>
__device__ __forceinline__ Vec<T, N> load_stream_if(const T* p, bool pred) {
  constexpr int kBytes = sizeof(T) * N;
  static_assert(kBytes == 16 || kBytes == 8 || kBytes == 4 || kBytes == 2, "unsupported vector width");
  Vec<T, N> out;
  const unsigned pr = pred;
  if constexpr (kBytes == 16) {
    uint4 r;
    if constexpr (L2_256B) {
      asm volatile(
          "{ .reg .pred q; setp.ne.u32 q, %5, 0;\n"
          "  mov.b32 %0, 0; mov.b32 %1, 0; mov.b32 %2, 0; mov.b32 %3, 0;\n"
          "  @q ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4]; }"
          : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p), "r"(pr));
    } else {
      asm volatile(
          "{ .reg .pred q; setp.ne.u32 q, %5, 0;\n"
          "  mov.b32 %0, 0; mov.b32 %1, 0; mov.b32 %2, 0; mov.b32 %3, 0;\n"
          "  @q ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4]; }"
          : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p), "r"(pr));
    }
    *reinterpret_cast<uint4*>(&out) = r;
  } else if constexpr (kBytes == 8) {
    uint2 r;
    asm volatile(
        "{ .reg .pred q; setp.ne.u32 q, %3, 0;\n  mov.b32 %0, 0; mov.b32 %1, 0;\n"
        "  @q ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2]; }"
        : "=r"(r.x), "=r"(r.y) : "l"(p), "r"(pr));
    *reinterpret_cast<uint2*>(&out) = r;
  } else if constexpr (kBytes == 4) {
    unsigned r;
    asm volatile(
        "{ .reg .pred q; setp.ne.u32 q, %2, 0;\n  mov.b32 %0, 0;\n"
        "  @q ld.global.nc.L1::no_allocate.u32 %0, [%1]; }"
        : "=r"(r) : "l"(p), "r"(pr));
    *reinterpret_cast<unsigned*>(&out) = r;
  } else {
    unsigned short r;
    asm volatile(
        "{ .reg .pred q; setp.ne.u32 q, %2, 0;\n  mov.b16 %0, 0;\n"
        "  @q ld.global.nc.L1::no_allocate.u16 %0, [%1]; }"
        : "=h"(r) : "l"(p), "r"(pr));
    *reinterpret_cast<unsigned short*>(&out) = r;
  }
  return out;
}

// 16 bytes from shared memory at generic address p (16-byte aligned).
template <typename T, int N>
__device__ __forceinline__ Vec<T, N> load_shared(const T* p) {
  static_assert(sizeof(T) * N == 16, "one 16-byte access");
  Vec<T, N> out;
  uint4 r;
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "r"(a));
  *reinterpret_cast<uint4*>(&out) = r;
  return out;
}

// 16 bytes from global memory through L1 (ld.global.ca): for data written
// by other CTAs of this kernel, only after an acquire that made it visible
// (an acquire at gpu scope invalidates this SM's L1).
template <typename T, int N>
__device__ __forceinline__ Vec<T, N> load_global_l1(const T* p) {
  static_assert(sizeof(T) * N == 16, "one 16-byte access");
  Vec<T, N> out;
  uint4 r;
  asm volatile("ld.global.ca.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  *reinterpret_cast<uint4*>(&out) = r;
  return out;
}

template <typename T, int N>
__device__ __forceinline__ void store(T* p, const Vec<T, N>& v) {
  using R = typename detail::Raw<int(sizeof(T) * N)>::type;
  *reinterpret_cast<R*>(p) = *reinterpret_cast<const R*>(&v);
}

// Streaming store (evict-first): output written once and not read again here.
template <typename T, int N>
__device__ __forceinline__ void store_stream(T* p, const Vec<T, N>& v) {
  using R = typename detail::Raw<int(sizeof(T) * N)>::type;
  __stcs(reinterpret_cast<R*>(p), *reinterpret_cast<const R*>(&v));
}

}  // namespace tc
