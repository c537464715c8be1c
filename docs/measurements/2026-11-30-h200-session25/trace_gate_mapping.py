"""Patches a copy of kernels/ (argv[1]; the kernels after session 25's
prepare_mapping change) so that the gate+mapping kernel prints one GMTRACE
line per block: %globaltimer (thread 0) at entry (e), after the grid
dependency wait (d), in gate warp 0 after its loads (g1), its kept groups
(g2) and its top-k loop (g3), after the gate + prepare barrier (g), after
the done atomic (a), and in the last block after counting (cnt), the
offsets (scan), its own placing (place) and the end (end). Diagnostic only
(printf perturbs the ends); summarise with trace_gate_mapping_summary.py."""
import sys

d = sys.argv[1]


def patch(path, pairs):
    s = open(path).read()
    for a, b in pairs:
        assert a in s, (path, a)
        s = s.replace(a, b, 1)
    open(path, 'w').write(s)


open(d + '/moe/tc_trace.cuh', 'w').write('''#pragma once
namespace tc::moe {
__shared__ unsigned long long tc_tr[16];
__device__ __forceinline__ unsigned long long tc_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t) :: "memory");
  return t;
}
}
#define TC_STAMP(k) do { if (threadIdx.x == 0) tc_tr[k] = tc_now(); } while (0)
''')
patch(d + '/moe/fused_mapping.cuh', [
    ('#include "moe/fused_mapping_params.cuh"\n', '#include "moe/fused_mapping_params.cuh"\n#include "moe/tc_trace.cuh"\n'),
    ("  // B. per expert (thread e)", "  TC_STAMP(6);\n  // B. per expert (thread e)"),
    ("  if (tid == 0) *p.num_tiles = offs[E] / p.block_m;\n\n  place_slots",
     "  if (tid == 0) *p.num_tiles = offs[E] / p.block_m;\n  TC_STAMP(7);\n\n  place_slots"),
    ("  own_tiles(p, offs, 0, p.rows / p.block_m, tid, kMappingThreads);\n}",
     "  TC_STAMP(8);\n  own_tiles(p, offs, 0, p.rows / p.block_m, tid, kMappingThreads);\n  __syncthreads();\n  TC_STAMP(9);\n}"),
])
patch(d + '/moe/topk_gate.cuh', [
    ('#include "moe/topk_gate_params.cuh"\n', '#include "moe/topk_gate_params.cuh"\n#include "moe/tc_trace.cuh"\n'),
    ("  if constexpr (MODE == 0) {\n    float m = kNegInf;",
     "  if (threadIdx.x == 0) { float z = 0.f; for (int j = 0; j < EPL; ++j) z += choice[j] + bias[j]; if (z == 12345.f) tc_tr[15] = 1; }\n"
     "  TC_STAMP(10);\n  if constexpr (MODE == 0) {\n    float m = kNegInf;"),
    ("  // Selection k lands in lane k's registers", "  TC_STAMP(11);\n  // Selection k lands in lane k's registers"),
    ("  if (lane < K) {\n    p.ids[t * K + lane] = my_id;", "  TC_STAMP(12);\n  if (lane < K) {\n    p.ids[t * K + lane] = my_id;"),
])
patch(d + '/moe/gate_mapping.cuh', [
    ("  grid_dependency_begin();\n  const int warp", """  if (threadIdx.x == 0) { for (int i = 0; i < 16; ++i) tc_tr[i] = 0; tc_tr[0] = tc_now(); }
  grid_dependency_begin();
  TC_STAMP(1);
  const int warp"""),
    ("  prepare_mapping(p.mapping, smem, blockIdx.x, gridDim.x);\n  __syncthreads();\n",
     "  prepare_mapping(p.mapping, smem, blockIdx.x, gridDim.x);\n  __syncthreads();\n  TC_STAMP(2);\n"),
    ("    __syncthreads();\n    if (!last) return;",
     "    __syncthreads();\n    TC_STAMP(3);\n"
     "    if (!last) { if (threadIdx.x == 0) printf(\"GMTRACE blk %d last 0 e %llu d %llu g1 %llu g2 %llu g3 %llu g %llu a %llu\\n\", blockIdx.x, tc_tr[0], tc_tr[1], tc_tr[10], tc_tr[11], tc_tr[12], tc_tr[2], tc_tr[3]); return; }"),
    ("  if (threadIdx.x == 0 && gridDim.x > 1) *p.done = 0u;",
     "  if (threadIdx.x == 0 && gridDim.x > 1) *p.done = 0u;\n"
     "  if (threadIdx.x == 0) printf(\"GMTRACE blk %d last 1 e %llu d %llu g1 %llu g2 %llu g3 %llu g %llu a %llu cnt %llu scan %llu place %llu end %llu\\n\","
     " blockIdx.x, tc_tr[0], tc_tr[1], tc_tr[10], tc_tr[11], tc_tr[12], tc_tr[2], tc_tr[3], tc_tr[6], tc_tr[7], tc_tr[8], tc_tr[9]);"),
])
