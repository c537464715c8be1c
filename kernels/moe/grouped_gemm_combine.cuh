#pragma once
// The weighted combine fused into the warp-specialised grouped GEMM (the
// layer's down projection, GroupedGemmParams::comb_sync set): the producer
// warpgroup's three idle warps (A and weights come by TMA, issued by one
// thread) sum each token's rows while the consumers compute later tiles, so
// the combine's reads and writes overlap the MMAs instead of following them.
//
// Protocol (all counters in comb_sync, zero at launch):
// - A consumer warpgroup's thread 0, once its part of a tile's stores has
//   completed (not just been read), releases one arrival on the tile's row
//   block counter. A row block (comb_group row tiles) is done when every
//   column tile of each of its row tiles arrived from both warpgroups.
// - Combine warps claim work in order from one counter: first chunks of 32
//   tokens to check for tokens with no routed slot (written as zeros), then
//   chunks of 16 layout rows. A row is combined by whoever claims it only if
//   it is its token's last slot in layout order (the highest position), so
//   every token is written exactly once, and mostly after its last slot's
//   tile, when the others are long stored (tiles run roughly in row order).
//   Before reading, the warp acquires the row block of every slot.
// - No consumer ever waits on a combine warp, so the GEMM cannot stall on
//   it; a combine warp waits only for tiles that consumers will store.
// - Each role (2 consumer warpgroups, 3 combine warps per CTA) counts itself
//   done; the last one resets every counter to zero for the next launch.
// The sum has moe_reduce_fused's rounding: fp32 FMAs in slot order from
// zero, one rounding to the output type, so the bits equal the two kernels'.
#include "moe/grouped_gemm.cuh"
#include "moe/grouped_gemm_params.cuh"
#include "tile/atomics.cuh"
#include "tile/types.cuh"
#include "tile/vec.cuh"

namespace tc::moe {

constexpr int kCombineWarps = 3;      // producer warpgroup warps 1..3
constexpr int kCombineRoles = 2 + kCombineWarps;  // per CTA: consumer warpgroups + combine warps
constexpr int kCombineRowsPerClaim = 16;
constexpr int kCombineTokensPerClaim = 32;

__device__ __forceinline__ void red_release_gpu(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned ld_acquire_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
// 16 bytes through L2 only (rows other CTAs stored during this kernel; read
// after an acquire), zeros when !pred.
template <typename T>
__device__ __forceinline__ Vec<T, 8> load_cg_if(const T* p, bool pred) {
  Vec<T, 8> out;
  uint4 r = make_uint4(0, 0, 0, 0);
  if (pred)
    asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  *reinterpret_cast<uint4*>(&out) = r;
  return out;
}

template <typename OutT, int BM, int BN>
struct GemmCombine {
  static_assert(sizeof(OutT) == 2, "16-bit outputs (the layer's activations)");

  // Counter of row block b, and the arrivals that complete it.
  static __device__ __forceinline__ unsigned* block_counter(const GroupedGemmParams& p, int b) {
    return p.comb_sync + 2 + b;
  }
  static __device__ __forceinline__ unsigned block_arrivals(const GroupedGemmParams& p, int b, int tiles) {
    const int col_tiles = (p.N + BN - 1) / BN;
    const int rows = min(p.comb_group, tiles - b * p.comb_group);
    return unsigned(2 * col_tiles * rows);
  }

  // Consumer warpgroup thread 0: its stores of row tile `tm` are complete.
  static __device__ __forceinline__ void publish(const GroupedGemmParams& p, int tm) {
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");   // the tensor stores landed
    asm volatile("fence.proxy.async.global;\n" ::: "memory");     // async-proxy writes, then generic readers
    red_release_gpu(block_counter(p, tm / p.comb_group), 1u);
  }

  // Consumer warpgroup thread 0, for a unit `idx` it skips (a row tile of
  // no expert): that tile counts as stored, so no combine warp waits on it.
  static __device__ __forceinline__ void skip(const GroupedGemmParams& p, long long idx, int tiles) {
    int tm = -1, tn;
    if (p.group_m > 0) {
      if (!gemm_group_tile<true>(p, idx, tiles, BN, tm, tn)) tm = -1;
    } else {
      tm = int(idx % ((p.M + BM - 1) / BM));
    }
    if (tm >= 0 && tm < tiles) red_release_gpu(block_counter(p, tm / p.comb_group), 1u);
  }

  // Each role once, when it is done; the last resets the counters.
  static __device__ __forceinline__ void role_done(const GroupedGemmParams& p, int tiles) {
    const unsigned total = unsigned(kCombineRoles) * gridDim.x;
    if (atomic_add_acq_rel_gpu(p.comb_sync + 1, 1u) != total - 1) return;
    const int blocks = (tiles + p.comb_group - 1) / p.comb_group;
    for (int b = 0; b < blocks; ++b) block_counter(p, b)[0] = 0u;
    p.comb_sync[0] = 0u;
    p.comb_sync[1] = 0u;
  }

  // Lane 0..K-1 waits until its slot's row block is complete.
  static __device__ __forceinline__ void wait_slot(const GroupedGemmParams& p, int pos, bool valid, int tiles) {
    if (valid) {
      const int b = pos / BM / p.comb_group;
      const unsigned want = block_arrivals(p, b, tiles);
      const unsigned* c = block_counter(p, b);
      while (ld_acquire_gpu(c) < want) __nanosleep(200);
    }
    __syncwarp();
  }

  // Slots k0 .. k0 + KG - 1 of U chunks (8 elements each) at chunk ch0 + 32 u,
  // added in slot order into acc.
  template <int KG, int U>
  static __device__ __forceinline__ void add_slots(const GroupedGemmParams& p, int K, int k0, int my_pos,
                                                   float my_w, int ch0, int chunks, float (&acc)[U][8]) {
    const OutT* y = static_cast<const OutT*>(p.c);
    Vec<OutT, 8> v[KG][U];
#pragma unroll
    for (int j = 0; j < KG; ++j) {
      const int k = k0 + j;
      const int pos = __shfl_sync(0xffffffffu, my_pos, k & 31);
      const bool ok = k < K && unsigned(pos) < unsigned(p.M);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int ch = ch0 + 32 * u;
        v[j][u] = load_cg_if(y + (long long)(ok ? pos : 0) * p.ldc + ch * 8, ok && ch < chunks);
      }
    }
#pragma unroll
    for (int j = 0; j < KG; ++j) {
      const int k = k0 + j;
      const int pos = __shfl_sync(0xffffffffu, my_pos, k & 31);
      const float w = __shfl_sync(0xffffffffu, my_w, k & 31);
      if (k >= K || unsigned(pos) >= unsigned(p.M)) continue;
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[u][e] = __fmaf_rn(to_float(v[j][u].v[e]), w, acc[u][e]);
    }
  }

  // out[t] from the slots lane k < K holds (my_pos, my_w); KG slots and U
  // chunks per lane in flight at once.
  template <int KG, int U>
  static __device__ __forceinline__ void sum_token(const GroupedGemmParams& p, long long t, int K, int my_pos,
                                                   float my_w) {
    OutT* out = static_cast<OutT*>(p.comb_out) + t * p.N;
    const int lane = threadIdx.x & 31, chunks = p.N / 8;
    // Warp-uniform trips (add_slots shuffles over the whole warp): a lane
    // past the row's last chunk loads nothing and stores nothing. (A loop
    // bounded per lane left lanes out of the shuffles wherever N / 8 is not
    // a multiple of 32 U, and the warp hung: H = 664 or 1232.)
    for (int base = 0; base < chunks; base += 32 * U) {
      const int ch0 = base + lane;
      float acc[U][8];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[u][e] = 0.f;
      for (int k0 = 0; k0 < K; k0 += KG) add_slots<KG, U>(p, K, k0, my_pos, my_w, ch0, chunks, acc);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int ch = ch0 + 32 * u;
        if (ch >= chunks) continue;
        Vec<OutT, 8> o;
#pragma unroll
        for (int e = 0; e < 8; ++e) o.v[e] = from_float<OutT>(acc[u][e]);
        store(out + ch * 8, o);
      }
    }
  }

  // Token t, whose last slot the caller's row is: wait for its slots' rows,
  // then sum them.
  static __device__ __forceinline__ void combine_token(const GroupedGemmParams& p, long long t, int tiles) {
    const int lane = threadIdx.x & 31, K = p.comb_k;
    const int my_pos = lane < K ? p.comb_pos[t * K + lane] : -1;
    const float my_w = lane < K && p.comb_weights ? p.comb_weights[t * K + lane] : 1.f;
    wait_slot(p, my_pos, lane < K && unsigned(my_pos) < unsigned(p.M), tiles);
    if (K <= 2) sum_token<2, 2>(p, t, K, my_pos, my_w);
    else sum_token<4, 1>(p, t, K, my_pos, my_w);
  }

  // Tokens [t0, t0 + 32) with no slot in [0, M) get zeros.
  static __device__ __forceinline__ void zero_unrouted(const GroupedGemmParams& p, long long t0) {
    const int lane = threadIdx.x & 31, K = p.comb_k;
    const long long t = t0 + lane;
    bool routed = t >= p.comb_tokens;
    for (int k = 0; k < K && !routed; ++k) routed = unsigned(p.comb_pos[t * K + k]) < unsigned(p.M);
    unsigned unrouted = __ballot_sync(0xffffffffu, !routed);  // lanes whose token has no slot
    const int chunks = p.N / 8;
    Vec<OutT, 8> z;
#pragma unroll
    for (int e = 0; e < 8; ++e) z.v[e] = from_float<OutT>(0.f);
    for (; unrouted; unrouted &= unrouted - 1) {
      OutT* out = static_cast<OutT*>(p.comb_out) + (t0 + __ffs(unrouted) - 1) * p.N;
      for (int ch = lane; ch < chunks; ch += 32) store(out + ch * 8, z);
    }
  }

  // Layout rows [r0, r0 + 16): each that is its token's last slot.
  static __device__ __forceinline__ void combine_rows(const GroupedGemmParams& p, int r0, int tiles) {
    const int lane = threadIdx.x & 31, K = p.comb_k;
    int t = -1;
    bool last = false;
    if (lane < kCombineRowsPerClaim) {
      t = p.comb_row_token[r0 + lane];
      if (t >= 0 && t < p.comb_tokens) {
        int top = -1;
        for (int k = 0; k < K; ++k) {
          const int pos = p.comb_pos[(long long)t * K + k];
          if (unsigned(pos) < unsigned(p.M)) top = max(top, pos);
        }
        last = top == r0 + lane;
      }
    }
    for (unsigned lasts = __ballot_sync(0xffffffffu, last); lasts; lasts &= lasts - 1)
      combine_token(p, __shfl_sync(0xffffffffu, t, __ffs(lasts) - 1), tiles);
  }

  // A combine warp's whole life.
  static __device__ __forceinline__ void run(const GroupedGemmParams& p, int tiles) {
    const int lane = threadIdx.x & 31;
    const unsigned zero_claims = unsigned((p.comb_tokens + kCombineTokensPerClaim - 1) / kCombineTokensPerClaim);
    const unsigned claims = zero_claims + unsigned(tiles) * (BM / kCombineRowsPerClaim);
    for (;;) {
      unsigned c = 0;
      if (lane == 0) c = atomicAdd(p.comb_sync, 1u);
      c = __shfl_sync(0xffffffffu, c, 0);
      if (c >= claims) break;
      if (c < zero_claims) zero_unrouted(p, (long long)c * kCombineTokensPerClaim);
      else combine_rows(p, int(c - zero_claims) * kCombineRowsPerClaim, tiles);
    }
    if (lane == 0) role_done(p, tiles);
  }
};

}  // namespace tc::moe
