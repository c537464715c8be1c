#pragma once
// Programmatic dependent launch (sm_90+). The JIT may launch a kernel whose
// spec says `waits_for_previous_grid` while the previous kernel in the stream
// is still draining: its CTAs become resident in the freed slots and run up
// to this call, which holds them until the previous grid has finished and
// its writes are visible. So a kernel calls it before its first global
// access (read or write), and may do only shared-memory setup before it.
// One exception: reads of data the caller declares complete before the
// previous kernel began (each CTA of that kernel passed its own wait before
// this one could launch), used only as hints, such as the decode combine
// kernel's L2 prefetch from its routing ids (GroupedGemmParams::prefetch).
// It also lets the next kernel be scheduled at once: that kernel waits the
// same way, so it cannot run ahead of this one's results. On older GPUs and
// under a plain launch both instructions return at once.
namespace tc {

// The two halves apart, for a kernel with work that needs nothing from the
// previous one: the bulk decode GEMV's producer issues its first weight
// copies before the wait when the schedule was settled earlier.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dependency_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void grid_dependency_begin() {
  grid_dependency_wait();
  grid_dependency_launch_dependents();
}

}  // namespace tc
