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

static_assert(grouped_gemm::kLargeTable <= tc::moe::kMaxMapExperts, "every pointer table's experts fit the builder");
static_assert(2 * tc::moe::kMaxMapExperts * sizeof(tc::moe::TmaDesc) <= MapSlotTable::kChunkBytes,
              "the largest weight set's maps fit a chunk");

std::mutex& table_mutex() {
  static std::mutex mu;
  return mu;
}

}  // namespace

bool MapSlotTable::place(size_t bytes, Slot& s) {
  for (size_t c = 0; c < chunks_.size(); ++c) {
    if (chunks_[c].used + bytes > kChunkBytes) continue;
    s = Slot{c, chunks_[c].used, false};
    chunks_[c].used += bytes;
    return true;
  }
  return false;
}

uint64_t MapSlotTable::slot(const std::vector<uint64_t>& key, size_t bytes, bool capturing,
                            const std::function<uint64_t()>& new_chunk, const std::function<void()>& sync) {
  auto it = slots_.find(key);
  if (it == slots_.end()) {
    if (bytes > kChunkBytes) return 0;
    Slot s;
    bool ok = place(bytes, s);
    if (!ok && chunks_.size() < kMaxChunks) {
      chunks_.push_back(Chunk{new_chunk(), 0, false});
      ok = place(bytes, s);
    }
    if (!ok && !capturing) {
      sync();
      for (auto i = slots_.begin(); i != slots_.end();) i = i->second.pinned ? std::next(i) : slots_.erase(i);
      for (Chunk& c : chunks_)
        if (!c.pinned) c.used = 0;
      ok = place(bytes, s);
    }
    if (!ok) return 0;
    it = slots_.emplace(key, s).first;
  }
  Slot& s = it->second;
  if (capturing) s.pinned = chunks_[s.chunk].pinned = true;
  return chunks_[s.chunk].base + s.offset;
}

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
  static std::map<int, MapSlotTable> tables;
  const size_t bytes = size_t(mats) * E * sizeof(tc::moe::TmaDesc);
  const uint64_t at = tables[device].slot(
      key, bytes, capturing,
      [] {
        CUdeviceptr base = 0;
        TC_DRV(cuMemAlloc, &base, MapSlotTable::kChunkBytes);
        return uint64_t(base);
      },
      [] { TC_DRV(cuCtxSynchronize); });
  TC_CHECK_ARG(at != 0, op, "w",
               fmt::format("room for the tensor maps of {} experts by pointer ({} chunks of {} MB per GPU, not all "
                           "held by slots that CUDA graphs captured{})",
                           E, MapSlotTable::kMaxChunks, MapSlotTable::kChunkBytes >> 20,
                           capturing ? "; or one such call before capturing" : ""),
               fmt::format("{} bytes more{}", bytes, capturing ? " while capturing" : ""));
  auto* dst = reinterpret_cast<tc::moe::TmaDesc*>(at);

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
