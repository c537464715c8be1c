#include "ops/moe/tma_map_table.h"

#include <fmt/format.h>

#include <cstring>
#include <functional>
#include <map>
#include <thread>

#include "moe/tma_maps_params.cuh"
#include "ops/moe/moe_grouped_gemm_common.h"
#include "tilecraft/error.h"
#include "tilecraft/jit/op_kernel_cache.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::ops {

namespace {

// 4 MB holds the maps of 32 gated sets of 512 experts, or 128 of 128; a
// device gets at most 16 such chunks (64 MB).
constexpr size_t kChunkBytes = size_t(4) << 20;
constexpr size_t kMaxChunks = 16;
static_assert(grouped_gemm::kLargeTable <= tc::moe::kMaxMapExperts, "every pointer table's experts fit the builder");

struct Chunk {
  CUdeviceptr base = 0;
  size_t used = 0;
  bool pinned = false;  // holds a slot a CUDA graph uses
};
struct Slot {
  size_t chunk = 0, offset = 0;
  bool pinned = false;
};
struct Table {
  std::vector<Chunk> chunks;
  std::map<std::vector<uint64_t>, Slot> slots;  // weight set -> slot
};

std::mutex& table_mutex() {
  static std::mutex mu;
  return mu;
}

bool place(Table& t, size_t bytes, Slot& s) {
  for (size_t c = 0; c < t.chunks.size(); ++c) {
    if (t.chunks[c].used + bytes > kChunkBytes) continue;
    s = Slot{c, t.chunks[c].used, false};
    t.chunks[c].used += bytes;
    return true;
  }
  return false;
}

// Every launch issued so far has finished after the synchronisation, so
// slots no graph uses may go to other weight sets; a chunk that holds a
// graph's slot keeps its space as it is.
void reclaim(Table& t) {
  TC_DRV(cuCtxSynchronize);
  for (auto it = t.slots.begin(); it != t.slots.end();) it = it->second.pinned ? std::next(it) : t.slots.erase(it);
  for (Chunk& c : t.chunks)
    if (!c.pinned) c.used = 0;
}

}  // namespace

jit::KernelSpec tma_maps_kernel_spec() {
  return {"moe/tma_maps.cuh", "tc::moe::build_tma_maps_kernel", {}, "weight tensor maps in global memory", true};
}

DeviceWeightMaps device_weight_maps(const tc::moe::TmaDesc (&tmpl)[2], const std::vector<const void*> (&bases)[2],
                                    int mats, int device, CUstream stream, const jit::CompileOptions& compile,
                                    const char* op) {
  const size_t E = bases[0].size();
  TC_CHECK_ARG((mats == 1 || (mats == 2 && bases[1].size() == E)) && E >= 1 && E <= size_t(tc::moe::kMaxMapExperts),
               op, "w", fmt::format("1 to {} experts per matrix, the same count for `up`", tc::moe::kMaxMapExperts),
               fmt::format("{} matrices of {} and {} experts", mats, E, bases[1].size()));
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  TC_DRV(cuStreamIsCapturing, stream, &status);
  const bool capturing = status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
  // The slot's bytes follow from the templates and the bases alone; the
  // key also holds the stream (and whether it is capturing), because the
  // maps' kernel leaves expert 0's address in a map for a moment while it
  // rewrites it, so two launch sequences that may overlap must not share a
  // slot. On one stream they run in order. The per-thread default stream
  // is one handle for many streams: the thread tells them apart.
  const uint64_t per_thread =
      stream == CU_STREAM_PER_THREAD ? uint64_t(std::hash<std::thread::id>()(std::this_thread::get_id())) : 0;
  std::vector<uint64_t> key{uint64_t(reinterpret_cast<uintptr_t>(stream)), per_thread, uint64_t(capturing),
                            uint64_t(mats), uint64_t(E)};
  for (int m = 0; m < mats; ++m) {
    key.insert(key.end(), std::begin(tmpl[m].word), std::end(tmpl[m].word));
    for (const void* b : bases[m]) key.push_back(uint64_t(reinterpret_cast<uintptr_t>(b)));
  }
  DeviceWeightMaps out;
  out.hold = std::unique_lock<std::mutex>(table_mutex());
  static std::map<int, Table> tables;
  Table& t = tables[device];
  auto it = t.slots.find(key);
  if (it == t.slots.end()) {
    const size_t bytes = size_t(mats) * E * sizeof(tc::moe::TmaDesc);
    Slot s;
    // A new chunk while there may be more (a model's every layer fits: 58
    // layers of 256 experts take 5.6 MB), then the reclaim.
    bool ok = place(t, bytes, s);
    if (!ok && t.chunks.size() < kMaxChunks) {
      Chunk c;
      TC_DRV(cuMemAlloc, &c.base, kChunkBytes);
      t.chunks.push_back(c);
      ok = place(t, bytes, s);
    }
    if (!ok && !capturing) {
      reclaim(t);
      ok = place(t, bytes, s);
    }
    TC_CHECK_ARG(ok, op, "w",
                 fmt::format("room for the tensor maps of {} experts by pointer ({} chunks of {} MB per GPU, "
                             "not all held by weight sets that CUDA graphs captured{})",
                             E, kMaxChunks, kChunkBytes >> 20, capturing ? "; or the op run once before capturing" : ""),
                 fmt::format("{} bytes more{}", bytes, capturing ? " while capturing" : ""));
    it = t.slots.emplace(key, s).first;
  }
  Slot& s = it->second;
  if (capturing) s.pinned = t.chunks[s.chunk].pinned = true;
  auto* dst = reinterpret_cast<tc::moe::TmaDesc*>(t.chunks[s.chunk].base + s.offset);

  static thread_local tc::moe::TmaMapsBuild b;  // 8 KB: off the stack
  std::memset(&b, 0, sizeof(b));
  b.dst = dst;
  b.experts = int(E), b.mats = mats;
  for (int m = 0; m < mats; ++m) {
    b.tmpl[m] = tmpl[m];
    std::memcpy(b.ptr[m], bases[m].data(), E * sizeof(void*));
  }
  const unsigned threads = tc::moe::kTmaMapsThreads, blocks = unsigned((size_t(mats) * E + threads - 1) / threads);
  static jit::OpKernelCache kernels;
  jit::launch(kernels.get(0, compile, device, tma_maps_kernel_spec), blocks, 1, threads, 0, stream, &b);
  out.maps[0] = dst;
  out.maps[1] = mats == 2 ? dst + E : nullptr;
  return out;
}

}  // namespace tilecraft::ops
