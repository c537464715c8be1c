#pragma once
// Thread-block clusters (sm_90): a CTA's rank, the cluster-wide barrier, and
// mbarrier operations on a peer CTA's shared memory. Addresses are 32-bit
// shared-window addresses: shared::cta for this CTA, shared::cluster (from
// cluster_map) for a peer's.

namespace tc {

__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));  // not volatile: a constant the compiler may re-read
  return r;
}

// Every non-exited thread of the cluster arrives, then waits for the others:
// orders shared-memory writes (mbarrier inits included) before any peer's
// later accesses, and keeps each CTA's shared memory alive until its peers
// are done with it.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// The shared::cluster address of `cta_addr` (a shared::cta address of this
// CTA's layout) in the shared memory of the cluster's CTA `rank`.
__device__ __forceinline__ unsigned cluster_map(unsigned cta_addr, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(cta_addr), "r"(rank));
  return r;
}

// One arrival on a peer's mbarrier, releasing this thread's earlier writes at
// cluster scope (its waiter acquires them with mbar_wait_cluster).
__device__ __forceinline__ void mbar_arrive_remote(unsigned cluster_addr) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_addr) : "memory");
}

// One arrival on a peer's mbarrier that orders nothing beyond this CTA
// (release at CTA scope, the default): enough to say "done reading my own
// slot" when the peer only overwrites that slot by TMA afterwards.
__device__ __forceinline__ void mbar_arrive_remote_cta(unsigned cluster_addr) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_addr) : "memory");
}

// A 64-bit store into a peer's shared memory.
__device__ __forceinline__ void st_remote_u64(unsigned cluster_addr, unsigned long long v) {
  asm volatile("st.shared::cluster.u64 [%0], %1;\n" ::"r"(cluster_addr), "l"(v) : "memory");
}

// Waits for phase `parity` of this CTA's mbarrier at `cta_addr`, acquiring at
// cluster scope what the arrivals (local or remote) released.
__device__ __forceinline__ void mbar_wait_cluster(unsigned cta_addr, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(cta_addr), "r"(parity)
        : "memory");
  } while (!done);
}

}  // namespace tc
