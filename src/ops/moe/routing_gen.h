#pragma once
// Seeded routing generators shared by the MoE adapters (mapping, grouped
// GEMM, layer): top-k expert ids of each routing kind a workload can name.
#include <cstdint>

#include "tilecraft/harness/manifest.h"

namespace tilecraft::harness {

// kind = workload param "routing": uniform | skewed | one_hot | empty_experts | dropped.
// K distinct experts per token except one_hot (every slot on expert 0).
// Errors name `op` and the workload.
void fill_routing_ids(const char* op, const WorkloadSpec& w, uint64_t seed, int32_t* ids, int64_t T, int64_t K,
                      int64_t E);

}  // namespace tilecraft::harness
