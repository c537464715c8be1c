#pragma once
// Tensor maps in global memory for the warp-specialised grouped GEMM when
// more experts come by pointer than the launch parameters hold
// (tc::moe::kParamMaps): a slot per weight set and stream, rewritten by a
// small kernel on that stream before each launch that reads it.
#include <cuda.h>

#include <mutex>
#include <vector>

#include "moe/grouped_gemm_params.cuh"
#include "tilecraft/jit/kernel_spec.h"
#include "tilecraft/jit/options.h"

namespace tilecraft::ops {

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
// streams could read a map mid-rewrite. Slots used
// while `stream` is capturing are kept for the life of the process (the
// graph rewrites and reads them at each replay); others are reclaimed, after
// a device synchronisation, when the table is full (many weight sets of a
// short life, e.g. random draws). Throws, naming `op`, when a capture finds
// the table full.
DeviceWeightMaps device_weight_maps(const tc::moe::TmaDesc (&tmpl)[2], const std::vector<const void*> (&bases)[2],
                                    int mats, int device, CUstream stream, const jit::CompileOptions& compile,
                                    const char* op);

}  // namespace tilecraft::ops
