#pragma once
// moe_topk_gate: router logits -> top-k expert ids and routing weights.
//   MODE 0 softmax_topk:  p = softmax(l); top-k of p; weights p (renormalised
//                         to sum 1 if asked).
//   MODE 1 sigmoid_grouped_topk: s = sigmoid(l), choice = s + bias; groups of
//                         E/n_group experts scored by the sum of their top-2
//                         choices; the best topk_group groups kept; top-k of
//                         choice among them; weights s, renormalised if asked,
//                         times scale.
// Ties go to the smaller expert (and group) index. ROUND 1 (fp16) / 2 (bf16):
// logits and scores are rounded to that dtype first, as a framework router
// running in it computes them (so selections match such a reference exactly).
//
// One warp per token: lane l holds experts l, l+32, ... (EPL per lane), so the
// logits row is read with coalesced loads and every selection is a warp
// reduction (no runtime-indexed register arrays).
#include "moe/topk_gate_params.cuh"
#include "tile/grid_dependency.cuh"
#include "tile/target.cuh"
#include "tile/trace.cuh"
#include "tile/types.cuh"
#include "tile/warp.cuh"

namespace tc::moe {

template <int ROUND>
__device__ __forceinline__ float round_score(float v) {
  if constexpr (ROUND == 1) return __half2float(__float2half_rn(v));
  else if constexpr (ROUND == 2) return __bfloat162float(__float2bfloat16_rn(v));
  else return v;
}

constexpr int kGateWarpsPerBlock = 4;
constexpr int kMaxGroups = Target::kWarpSize;  // one group score per lane

// Grouped routing, any group size: group g's top-2 by two warp arg-maxes
// per group in turn (lane g keeps its score), then the topk_group best
// groups by warp arg-maxes over the lanes; ties to the smaller index.
// Returns the kept groups as a bit mask (n_group <= warp size).
template <int EPL>
__device__ __forceinline__ unsigned kept_groups_by_lane(const TopkGateParams& p, const float (&choice)[EPL],
                                                        const int (&grp)[EPL], int lane, int gsize) {
  constexpr int W = Target::kWarpSize;
  const float kNegInf = -__int_as_float(0x7f800000);
  float my_gscore = kNegInf;
#pragma unroll 1
  for (int g = 0; g < p.n_group; ++g) {
    // Top-2 choice scores of group g.
    ArgMax best{kNegInf, 0x7fffffff, 0.f};
#pragma unroll
    for (int j = 0; j < EPL; ++j) {
      const int e = lane + j * W;
      if (grp[j] == g && (choice[j] > best.value || (choice[j] == best.value && e < best.index)))
        best = ArgMax{choice[j], e, 0.f};
    }
    const ArgMax first = warp_argmax(best);
    ArgMax second{kNegInf, 0x7fffffff, 0.f};
#pragma unroll
    for (int j = 0; j < EPL; ++j) {
      const int e = lane + j * W;
      if (grp[j] == g && e != first.index &&
          (choice[j] > second.value || (choice[j] == second.value && e < second.index)))
        second = ArgMax{choice[j], e, 0.f};
    }
    const ArgMax sec = warp_argmax(second);
    if (lane == g) my_gscore = gsize >= 2 ? first.value + sec.value : first.value;
  }
  // Keep the topk_group best groups, ties to the smaller group index.
  unsigned keep = 0;
#pragma unroll 1
  for (int r = 0; r < p.topk_group; ++r) {
    const bool open = lane < p.n_group && !(keep >> lane & 1u);
    const ArgMax g = warp_argmax(ArgMax{open ? my_gscore : kNegInf, open ? lane : 0x7fffffff, 0.f});
    keep |= 1u << g.index;
  }
  return keep;
}

// The top-2 of the union of two (largest, second largest) pairs. Symmetric
// and exact (no arithmetic), so every lane of a butterfly ends with the same.
__device__ __forceinline__ void top2_merge(float& a1, float& a2, float b1, float b2) {
  a2 = fmaxf(fminf(a1, b1), fmaxf(a2, b2));
  a1 = fmaxf(a1, b1);
}

// Grouped routing where a group is whole register slots (group size a
// multiple of the warp size, e.g. 256 experts in 8 groups): register slot j
// of every lane holds experts 32j.., all in group grp[j], and a group's slots
// are adjacent. One butterfly gives every lane every slot's top-2 (all slots
// at once: 5 dependent shuffle rounds instead of 2 x n_group warp arg-maxes
// in turn), the groups' scores follow by merging adjacent slots, and each
// lane picks the kept groups itself. Same scores (the two largest choices,
// summed in that order) and ties (smaller group index) as
// kept_groups_by_lane.
// Rolled loops where the body is a full pass: the code runs cold (the
// expert weights stream through L2 between calls, evicting it), and at
// decode sizes fetching it costs more than executing it (H200, session 18:
// 2349 instructions executed once each took 20K cycles).
template <int EPL>
__device__ __forceinline__ unsigned kept_groups_by_slot(const TopkGateParams& p, const float (&choice)[EPL],
                                                        const int (&grp)[EPL]) {
  constexpr int W = Target::kWarpSize;
  const float kNegInf = -__int_as_float(0x7f800000);
  float t1[EPL], t2[EPL];
#pragma unroll
  for (int j = 0; j < EPL; ++j) t1[j] = choice[j], t2[j] = kNegInf;
#pragma unroll 1
  for (int o = W / 2; o > 0; o >>= 1)
#pragma unroll
    for (int j = 0; j < EPL; ++j) {
      const float b1 = __shfl_xor_sync(0xffffffffu, t1[j], o), b2 = __shfl_xor_sync(0xffffffffu, t2[j], o);
      top2_merge(t1[j], t2[j], b1, b2);
    }
  // score[j]: the top-2 sum of slot j's group over slots up to j; it is the
  // group's score at the group's last slot (closes[j]). Padding slots (group
  // n_group) close nothing.
  float score[EPL];
  bool closes[EPL];
  float a1 = kNegInf, a2 = kNegInf;
#pragma unroll
  for (int j = 0; j < EPL; ++j) {
    if (j > 0 && grp[j] != grp[j - 1]) a1 = kNegInf, a2 = kNegInf;
    top2_merge(a1, a2, t1[j], t2[j]);
    score[j] = a1 + a2;
    closes[j] = grp[j] < p.n_group && (j == EPL - 1 || grp[j + 1] != grp[j]);
  }
  unsigned keep = 0;
#pragma unroll 1
  for (int r = 0; r < p.topk_group; ++r) {
    int best = -1;
    float bv = kNegInf;
#pragma unroll
    for (int j = 0; j < EPL; ++j)
      if (closes[j] && !(keep >> grp[j] & 1u) && (best < 0 || score[j] > bv)) best = grp[j], bv = score[j];
    if (best >= 0) keep |= 1u << best;
  }
  return keep;
}

// Token t's selection by one whole warp (`lane` = its lane); t < num_tokens.
template <int MODE, int EPL, int K, int ROUND>
__device__ __forceinline__ void topk_gate_token(const TopkGateParams& p, long long t, int lane) {
  constexpr int W = Target::kWarpSize;
  const float* row = p.logits + t * p.num_experts;
  const float kNegInf = -__int_as_float(0x7f800000);

  // Every global load first, together: the logits and (sigmoid mode) the
  // correction bias. Loaded next to their use, each bias load sat behind a
  // division's branch and waited alone: 8 DRAM round trips in turn, most of
  // the decode gate's 10 us on the H200 (session 18, ncu source counters).
  float choice[EPL], weight[EPL], bias[EPL];
  const bool has_bias = MODE == 1 && p.bias != nullptr;
#pragma unroll
  for (int j = 0; j < EPL; ++j) {
    const int e = lane + j * W;
    const bool live = e < p.num_experts;
    choice[j] = live ? __ldg(row + e) : kNegInf;
    bias[j] = live && has_bias ? __ldg(p.bias + e) : 0.f;
  }
#pragma unroll
  for (int j = 0; j < EPL; ++j)
    if (lane + j * W < p.num_experts) choice[j] = round_score<ROUND>(choice[j]);

  if constexpr (MODE == 0) {
    float m = kNegInf;
#pragma unroll
    for (int j = 0; j < EPL; ++j) m = fmaxf(m, choice[j]);
    m = warp_max(m);
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < EPL; ++j) {
      weight[j] = lane + j * W < p.num_experts ? expf(choice[j] - m) : 0.f;
      sum += weight[j];
    }
    sum = warp_sum(sum);
#pragma unroll
    for (int j = 0; j < EPL; ++j) {
      weight[j] = round_score<ROUND>(weight[j] / sum);
      choice[j] = lane + j * W < p.num_experts ? weight[j] : kNegInf;
    }
  } else {
#pragma unroll
    for (int j = 0; j < EPL; ++j) {
      const int e = lane + j * W;
      const float s = round_score<ROUND>(1.0f / (1.0f + expf(-choice[j])));
      weight[j] = s;
      choice[j] = e < p.num_experts ? s + bias[j] : kNegInf;
    }
    if (p.n_group > 1) {
      // Lane g keeps group g's score (n_group <= warp size): no local arrays.
      const int gsize = p.num_experts / p.n_group;
      // Group of each held expert, computed once (n_group for padding): one
      // division, then expert lane + j W stepped by W (q, r: its quotient
      // and remainder by gsize).
      int grp[EPL];
      int q = lane / gsize, r = lane - q * gsize;
#pragma unroll
      for (int j = 0; j < EPL; ++j) {
        grp[j] = lane + j * W < p.num_experts ? q : p.n_group;
        r += W;
        while (r >= gsize) r -= gsize, ++q;
      }
      const unsigned keep = gsize % W == 0 ? kept_groups_by_slot<EPL>(p, choice, grp)
                                           : kept_groups_by_lane<EPL>(p, choice, grp, lane, gsize);
#pragma unroll
      for (int j = 0; j < EPL; ++j) {
        const int e = lane + j * W;
        if (e < p.num_experts && !(keep >> grp[j] & 1u)) choice[j] = kNegInf;
      }
    }
  }

  // Selection k lands in lane k's registers: no per-thread arrays (K <= warp
  // size). Each selection is two redux instructions: the largest key, then
  // the smallest expert holding it (ties to the smaller index); the winner's
  // weight comes by one shuffle from its lane, off the selections' chain.
  // (DeepSeek-V3, H200 session 25: ~0.18 us per selection, against ~0.4 for
  // a warp arg-max of (value, index, weight) by shuffle rounds.) Key 0 marks
  // padding and chosen experts: below every score, so never chosen while K
  // is at most the experts eligible (the host checks).
  trace_stamp(9);
  unsigned key[EPL];
#pragma unroll
  for (int j = 0; j < EPL; ++j) key[j] = lane + j * W < p.num_experts ? score_key(choice[j]) : 0u;
  int my_id = 0;
  float my_w = 0.f, denom = 0.f;
#pragma unroll 1
  for (int k = 0; k < K; ++k) {
    const unsigned top = warp_extreme_u32<true>(extreme_of<true, 0, EPL>(key));
    unsigned mine[EPL];
#pragma unroll
    for (int j = 0; j < EPL; ++j) mine[j] = key[j] == top ? unsigned(lane + j * W) : 0xffffffffu;
    const unsigned win = warp_extreme_u32<false>(extreme_of<false, 0, EPL>(mine));
    float w = 0.f;
#pragma unroll
    for (int j = 0; j < EPL; ++j)
      if (mine[j] == win) w = weight[j], key[j] = 0u;
    w = __shfl_sync(0xffffffffu, w, int(win % W));
    if (lane == k) my_id = int(win), my_w = w;
    denom += w;  // in selection order, the same in every lane
  }
  trace_stamp(10);
  if (lane < K) {
    p.ids[t * K + lane] = my_id;
    p.weights[t * K + lane] = (p.renormalize ? my_w / denom : my_w) * p.scale;
  }
}

template <int MODE, int EPL, int K, int ROUND>
__global__ void __launch_bounds__(kGateWarpsPerBlock * Target::kWarpSize)
    topk_gate_kernel(const TopkGateParams p) {
  grid_dependency_begin();
  const long long t = 1ll * blockIdx.x * kGateWarpsPerBlock + threadIdx.x / Target::kWarpSize;
  if (t < p.num_tokens) topk_gate_token<MODE, EPL, K, ROUND>(p, t, threadIdx.x % Target::kWarpSize);
}

}  // namespace tc::moe
