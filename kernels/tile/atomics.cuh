#pragma once
// Device-scope atomics with explicit memory order, for the last-block and
// flag patterns: one ordered atomic by one thread, with a block barrier on
// either side, instead of a fence in every thread.
namespace tc {

// old = *p; *p += v, with acquire and release semantics at gpu scope: the
// caller's (and, through a preceding barrier, its block's) earlier writes
// are visible to whoever acquires the new value, and writes released
// before the old value are visible to the caller.
__device__ __forceinline__ unsigned atomic_add_acq_rel_gpu(unsigned* p, unsigned v) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

}  // namespace tc
