// Routing generators shared by the MoE adapters.
#include "ops/moe/routing_gen.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "tilecraft/error.h"
#include "tilecraft/harness/random.h"

namespace tilecraft::harness {

// Expert ids per routing kind. K distinct experts per token except one_hot,
// where every slot goes to expert 0 (duplicates within a token are legal).
void fill_routing_ids(const char* kOp, const WorkloadSpec& w, uint64_t seed, int32_t* ids, int64_t T, int64_t K, int64_t E,
                      const char* also) {
  const std::string kind = w.params.at("routing");
  static const char* const kKinds[] = {"uniform", "skewed", "one_hot", "empty_experts", "dropped"};
  if (std::none_of(std::begin(kKinds), std::end(kKinds), [&](const char* k) { return kind == k; })) {
    std::string known = also ? also : "";  // the caller's own kinds first
    for (const char* k : kKinds) known += (known.empty() ? "" : ", ") + std::string(k);
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{}: workload '{}': routing '{}' is not one of {}", kOp, w.name, kind, known));
  }
  if (kind != "one_hot" && K > E)
    throw Error(ErrorKind::kInvalidArgument, fmt::format("{}: workload '{}': K = {} exceeds E = {}", kOp, w.name, K, E));
  // skewed: half the tokens choose among the first K experts only;
  // empty_experts: only the even experts are ever chosen.
  std::vector<int32_t> pool(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    int64_t n = E;
    std::iota(pool.begin(), pool.end(), 0);
    if (kind == "skewed" && t % 2 == 0) n = K;
    if (kind == "empty_experts") {
      n = 0;
      for (int64_t e = 0; e < E; e += 2) pool[size_t(n++)] = int32_t(e);
      if (n < K) n = E, std::iota(pool.begin(), pool.end(), 0);
    }
    for (int64_t k = 0; k < K; ++k) {
      if (kind == "one_hot") {
        ids[t * K + k] = 0;
        continue;
      }
      uint64_t j = uint64_t(k) + random_bits(seed, 1, uint64_t(t * K + k)) % uint64_t(n - k);
      std::swap(pool[size_t(k)], pool[size_t(j)]);
      ids[t * K + k] = pool[size_t(k)];
      // dropped: a quarter of the slots are -1 or past the last expert (another rank's).
      if (kind == "dropped" && random_bits(seed, 2, uint64_t(t * K + k)) % 4 == 0)
        ids[t * K + k] = (random_bits(seed, 3, uint64_t(t * K + k)) & 1) ? -1 : int32_t(E + k);
    }
  }
}

bool workload_flag(const char* op, const WorkloadSpec& w, const std::string& key) {
  const std::string& v = w.params.at(key);
  if (v != "true" && v != "false")
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{}: workload '{}': {} '{}' is not true or false", op, w.name, key, v));
  return v == "true";
}

float workload_number(const char* op, const WorkloadSpec& w, const std::string& key) {
  const std::string& v = w.params.at(key);
  char* end = nullptr;
  const double x = v.empty() ? NAN : std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x) || !std::isfinite(float(x)))
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{}: workload '{}': {} '{}' is not a finite number", op, w.name, key, v));
  return float(x);
}

}  // namespace tilecraft::harness
