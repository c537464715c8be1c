#pragma once
// Tensor maps in global memory for the warp-specialised grouped GEMM when
// more experts come by pointer than the launch parameters hold
// (tc::moe::kParamMaps): a slot per weight set and stream, rewritten by a
// small kernel on that stream before each launch that reads it.
#include <cuda.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "moe/grouped_gemm_params.cuh"
#include "tilecraft/jit/kernel_spec.h"
#include "tilecraft/jit/options.h"

namespace tilecraft::ops {

// Where each weight set's maps lie: slots in chunks of device memory. The
// chunks' allocation and the device synchronisation come from the caller,
// so the bookkeeping runs (and is tested) without a GPU. Not thread-safe
// (the caller locks).
class MapSlotTable {
 public:
  // 4 MB holds the maps of 32 gated sets of 512 experts, or 128 of 128; a
  // device gets at most 16 such chunks (64 MB).
  static constexpr size_t kChunkBytes = size_t(4) << 20;
  static constexpr size_t kMaxChunks = 16;
  // The address of `key`'s slot of `bytes` (at most kChunkBytes), placed on
  // first sight: in a chunk with room, else in a new one (`new_chunk`
  // returns its base) while there may be more, else, when not capturing,
  // after `sync` (every launch so far has finished) in the space of slots no
  // capture used: those are forgotten, and a chunk holding a captured slot
  // keeps its space. 0 when there is no room.
  uint64_t slot(const std::vector<uint64_t>& key, size_t bytes, bool capturing,
                const std::function<uint64_t()>& new_chunk, const std::function<void()>& sync);
  size_t chunks() const { return chunks_.size(); }

 private:
  struct Chunk {
    uint64_t base = 0;
    size_t used = 0;
    bool pinned = false;  // holds a slot a CUDA graph uses
  };
  struct Slot {
    size_t chunk = 0, offset = 0;
    bool pinned = false;
  };
  bool place(size_t bytes, Slot& s);
  std::vector<Chunk> chunks_;
  std::map<std::vector<uint64_t>, Slot> slots_;
};

struct DeviceWeightMaps {
  const tc::moe::TmaDesc* maps[2] = {nullptr, nullptr};  // [experts] of each matrix
  // Held until the GEMM that reads the slot is launched: a slot is only ever
  // handed to another weight set after a device synchronisation, which must
  // not fall between this call and that launch.
  std::unique_lock<std::mutex> hold;
};

// The kernel that writes the maps (moe/tma_maps.cuh).
jit::KernelSpec tma_maps_kernel_spec();

// The maps of `bases[m][e]` for m < mats (1, or 2 for a gated pair), each
// `tmpl[m]` (expert 0's map) with its address replaced, in global memory on
// `device`, written by a kernel launched on `stream` now. While that kernel
// rewrites a map, the map holds expert 0's address for a moment, so a slot
// belongs to one weight set on one stream (eager, or captured: a graph's
// slots are not the eager calls' on its stream), where launches run in
// order. Left open: graphs captured on one stream with the same weights
// share a slot, so replaying two of them (or two instantiations of one; the
// launches of one executable graph are ordered) at once on different
// streams could read a map mid-rewrite; so could a stream destroyed with
// work pending next to a new stream that got its handle. (The maps
// finished in shared memory, docs/prepared/session54_tma_maps_smem.patch,
// close both.) Slots used while `stream` is capturing are kept for the life
// of the process (the graph rewrites and reads them at each replay); others
// are reclaimed, after a device synchronisation, when the table is full
// (many weight sets of a short life, e.g. random draws). Throws, naming
// `op`, when a capture finds the table full.
DeviceWeightMaps device_weight_maps(const tc::moe::TmaDesc (&tmpl)[2], const std::vector<const void*> (&bases)[2],
                                    int mats, int device, CUstream stream, const jit::CompileOptions& compile,
                                    const char* op);

}  // namespace tilecraft::ops
