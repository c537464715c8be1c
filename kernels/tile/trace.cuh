#pragma once
// Per-CTA phase stamps for diagnosis, compiled in only under the compile
// option `trace` (-DTC_TRACE); otherwise every call is empty and the kernel
// is unchanged. A stamp is %globaltimer (ns, one clock for all SMs), and
// %gridid (the launch) with %smid (where the CTA ran, in the low 10 bits)
// stored to tc_trace_stamps[cta][slot], plain stores,
// no printf: the host reads the buffer after the launches (jit::take_traces)
// and `tilecraft bench` prints each slot's spread over the CTAs. Each launch
// overwrites only the slots its CTAs stamp, so a slot one CTA stamps in one
// launch (the last block's) and another CTA in the next leaves both: the
// launch id lets the host keep the last launch's stamps alone. CTAs past
// kTraceCtas are not recorded.
#include "tile/trace_params.cuh"

#ifdef TC_TRACE
// C linkage: the host finds it by this name (cuModuleGetGlobal).
extern "C" {
// [cta][slot][2]: the time, then the launch << 10 | the SM.
__device__ unsigned long long tc_trace_stamps[tc::kTraceCtas * tc::kTraceSlots * 2];
}
#endif

namespace tc {

// Whether stamps are compiled in: a kernel's own tracer flag is
// `kTraceOn && ...`, so without the option it folds to false before code
// generation (a plain `threadIdx.x % 128 == 0` would be computed anyway and
// could move the kernel's other uses of it).
#ifdef TC_TRACE
constexpr bool kTraceOn = true;
#else
constexpr bool kTraceOn = false;
#endif

// The calling thread stamps `slot` for its CTA (the caller picks one thread).
__device__ __forceinline__ void trace_stamp_here(int slot) {
#ifdef TC_TRACE
  const unsigned cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (cta < unsigned(kTraceCtas) && slot >= 0 && slot < kTraceSlots) {
    unsigned long long t, grid;
    unsigned sm;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
    asm("mov.u64 %0, %%gridid;" : "=l"(grid));
    asm("mov.u32 %0, %%smid;" : "=r"(sm));
    tc_trace_stamps[2 * (cta * kTraceSlots + slot)] = t;
    tc_trace_stamps[2 * (cta * kTraceSlots + slot) + 1] = grid << 10 | (sm & 1023u);
  }
#else
  (void)slot;
#endif
}

// Thread 0 of the CTA stamps `slot`.
__device__ __forceinline__ void trace_stamp(int slot) {
#ifdef TC_TRACE
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) trace_stamp_here(slot);
#else
  (void)slot;
#endif
}

// Every thread of the CTA calls it: after a barrier, thread 0 stamps `slot`
// (the CTA's end, not one warp's). Without `trace` no barrier either.
__device__ __forceinline__ void trace_stamp_all_done(int slot) {
#ifdef TC_TRACE
  __syncthreads();
  trace_stamp(slot);
#else
  (void)slot;
#endif
}

}  // namespace tc
