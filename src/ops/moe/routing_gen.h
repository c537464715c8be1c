#pragma once
// Seeded routing generators shared by the MoE adapters (mapping, grouped
// GEMM, layer): top-k expert ids of each routing kind a workload can name;
// and the gate settings' workload parameters (gate and layer), read strictly.
#include <cstdint>
#include <string>

#include "tilecraft/harness/manifest.h"

namespace tilecraft::harness {

// kind = workload param "routing": uniform | skewed | one_hot | empty_experts | dropped.
// K distinct experts per token except one_hot (every slot on expert 0).
// Errors name `op` and the workload; `also` names the kinds the caller
// handles itself (fused_moe's "router"), so an unknown kind's message lists
// every choice the op takes.
void fill_routing_ids(const char* op, const WorkloadSpec& w, uint64_t seed, int32_t* ids, int64_t T, int64_t K,
                      int64_t E, const char* also = nullptr);

// Workload parameter `key` as a flag: "true" or "false"; anything else
// ("yes", "1", a typo) is refused naming op, workload and key (it read as
// false, so renormalize=ture ran unrenormalised and passed).
bool workload_flag(const char* op, const WorkloadSpec& w, const std::string& key);

// Workload parameter `key` as a finite number, the whole text ("2.5x",
// "nan" and "inf" are refused, naming op, workload and key).
float workload_number(const char* op, const WorkloadSpec& w, const std::string& key);

}  // namespace tilecraft::harness
