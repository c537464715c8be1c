"""(For the kernels of 77703cc.) Patches a copy of kernels/ (argv[1]) so that the gate+mapping kernel
prints one TRACE line per block: %globaltimer at entry, after the grid
dependency wait, after its gate warps, after its done atomic, and in the
last block after each mapping phase. Diagnostic only (printf perturbs the
ends); summarise with trace_gate_mapping_summary.py."""
import sys

d = sys.argv[1]


def patch(path, pairs):
    s = open(path).read()
    for a, b in pairs:
        assert a in s, (path, a)
        s = s.replace(a, b, 1)
    open(path, 'w').write(s)


# A namespace-scope shared array both functions can stamp (thread 0 only).
patch(d + '/moe/fused_mapping.cuh', [
    ("namespace tc::moe {\n", """namespace tc::moe {
__shared__ unsigned long long tc_tr[12];
__device__ __forceinline__ unsigned long long tc_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
#define TC_STAMP(k) do { if (threadIdx.x == 0) tc_tr[k] = tc_now(); } while (0)
"""),
    ("  if (one_chunk) count_chunk(ev, E, cnt + warp * E);", "  TC_STAMP(5);\n  if (one_chunk) count_chunk(ev, E, cnt + warp * E);"),
    ("  // B. per expert (thread e)", "  TC_STAMP(6);\n  // B. per expert (thread e)"),
    ("  if (tid == 0) *p.num_tiles = offs[E] / p.block_m;\n\n  place_slots",
     "  if (tid == 0) *p.num_tiles = offs[E] / p.block_m;\n  TC_STAMP(7);\n\n  place_slots"),
    ("  own_tiles(p, offs, 0, p.rows / p.block_m, tid, kMappingThreads);\n}",
     "  TC_STAMP(8);\n  own_tiles(p, offs, 0, p.rows / p.block_m, tid, kMappingThreads);\n  __syncthreads();\n  TC_STAMP(9);\n}"),
])
patch(d + '/moe/gate_mapping.cuh', [
    ("  grid_dependency_begin();\n  const int warp", """  if (threadIdx.x == 0) { for (int i = 0; i < 12; ++i) tc_tr[i] = 0; tc_tr[0] = tc_now(); }
  grid_dependency_begin();
  TC_STAMP(1);
  const int warp"""),
    ("topk_gate_token<MODE, EPL, K, ROUND>(g, t, threadIdx.x % W);\n",
     "topk_gate_token<MODE, EPL, K, ROUND>(g, t, threadIdx.x % W);\n  __syncthreads();\n  TC_STAMP(2);\n"),
    ("    if (threadIdx.x == 0) last = atomicAdd(p.done, 1u) == gridDim.x - 1;\n    __syncthreads();\n    if (!last) return;\n    __threadfence();",
     "    if (threadIdx.x == 0) last = atomicAdd(p.done, 1u) == gridDim.x - 1;\n    __syncthreads();\n    TC_STAMP(3);\n"
     "    if (!last) { if (threadIdx.x == 0) printf(\"GMTRACE blk %d last 0 e %llu d %llu g %llu a %llu\\n\", blockIdx.x, tc_tr[0], tc_tr[1], tc_tr[2], tc_tr[3]); return; }\n"
     "    __threadfence();\n    TC_STAMP(4);"),
    ("  if (threadIdx.x == 0 && gridDim.x > 1) *p.done = 0u;",
     "  if (threadIdx.x == 0 && gridDim.x > 1) *p.done = 0u;\n"
     "  if (threadIdx.x == 0) printf(\"GMTRACE blk %d last 1 e %llu d %llu g %llu a %llu acq %llu ld %llu cnt %llu scan %llu place %llu end %llu\\n\","
     " blockIdx.x, tc_tr[0], tc_tr[1], tc_tr[2], tc_tr[3], tc_tr[4], tc_tr[5], tc_tr[6], tc_tr[7], tc_tr[8], tc_tr[9]);"),
])
