#pragma once
// Kernel parameters of moe_reduce_fused, shared verbatim by the kernel and the
// host op (plain C++, no CUDA types) so the two layouts cannot drift.
namespace tc::moe {

struct ReduceFusedParams {
  const void* x;         // [E, H]
  const int* pos;        // [T, K]
  const float* weights;  // [T, K] or null
  const float* x_sf;     // [E] or null
  const float* sf;       // [1] or null
  void* out;             // [T, H]
  int* bad_slot;         // checked mode: [0] = min flat (t*K+k) index with pos >= E, [1] = count
  long long num_tokens;  // T
  int chunks_per_row;    // H / VEC
  int hidden;            // H
  int num_rows;          // E
};

}  // namespace tc::moe
