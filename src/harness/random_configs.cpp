#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <sstream>
#include <utility>
#include <vector>

#include "tilecraft/error.h"
#include "tilecraft/harness/random_shapes.h"

namespace tilecraft::harness {
namespace {
// A config key and the values a draw picks from: each key's valid range
// around its defaults plus values that some shapes or kernels refuse, so a
// draw exercises both the kernels' rarely chosen forms and their refusals.
struct KeyValues {
  const char* key;
  const char* values;  // integers separated by spaces
};

// moe_grouped_gemm's keys (README: "Kernel configs") in families: the
// keys one kernel takes, with the key that picks that kernel. A draw takes
// a family's keys together most of the time (so most draws run: keys of
// another kernel are refused), and sometimes any keys at all.
struct Family {
  KeyValues pick;  // the kernel's own selector (drawn with its keys half the time)
  std::vector<KeyValues> keys;
};

const std::vector<Family>& gemm_families() {
  static const std::vector<Family> f = {
      // warp-specialised wgmma kernel (sm_90)
      {{"sm90", "2"},
       {{"block_m", "64 128"},
        {"block_n", "64 128 256"},
        {"stages", "2 3 4 5 6"},
        {"tma", "0 1 2"},
        {"tma_store", "0 1"},
        {"persistent", "0 1 2"},
        {"group_m", "0 1 2 8 16"},
        {"half_skip", "0 1"},
        {"cluster", "1 2"},
        {"multicast", "0 1"},
        {"stagger", "0 1 2 3"},
        {"lean_a", "0 1"},
        {"lean_desc", "0 1"},
        {"fill_stores", "0 1"},
        {"group_align", "0 1 2 3"}}},
      // mma.sync kernel (every GPU)
      {{"sm90", "0"},
       {{"block_m", "16 32 64 128"},
        {"block_n", "32 64 128"},
        {"stages", "2 3 4 5"},
        {"warps_m", "1 2 4"},
        {"warps_n", "1 2 4"},
        {"k_splits", "1 2 3 4"},
        {"persistent", "0 1"},
        {"group_m", "0 1 8"}}},
      // decode kernels (weights streamed, no tensor cores)
      {{"gemv", "1"},
       {{"block_n", "8 16 32 64"},
        {"balance", "0 1 2"},
        {"bulk", "0 1"},
        {"bulk_cols", "0 1 2 4"},
        {"prefetch", "0 1"},
        {"preload", "0 1"},
        {"carveout", "0 1"}}},
  };
  return f;
}

// Every grouped GEMM key, values in and beyond the ranges (block_m 3 and
// stages 9 are refused by every kernel).
const std::vector<KeyValues>& gemm_keys() {
  static const std::vector<KeyValues> k = [] {
    std::vector<KeyValues> all = {{"sm90", "0 1 2"}, {"gemv", "0 1"}, {"block_m", "3"}, {"stages", "9"}};
    for (const Family& f : gemm_families()) all.insert(all.end(), f.keys.begin(), f.keys.end());
    return all;
  }();
  return k;
}

// The layer's own keys: the mapped path's, and the one-kernel decode
// split's (decode_split 1 or 2 picks it; it runs at T = 1 only).
const std::vector<KeyValues>& layer_keys() {
  static const std::vector<KeyValues> k = {
      {"mapping_blocks", "0 1 2 4 8 32"}, {"gate_tokens_per_block", "1 2 4 8 32 33"},
      {"decode", "0 1"},                      {"fused_combine", "0 1"},
      {"router_split", "-1 0"},
  };
  return k;
}
const Family& decode_split_family() {
  static const Family f = {{"decode_split", "0 1 2"},
                           {{"decode_split_cols", "8 16 32 64 128"},
                            {"decode_split_box_rows", "8 64 112 128 256"},
                            {"decode_split_pool", "0 1 4"}}};
  return f;
}

const std::vector<KeyValues>& mapping_keys() {
  static const std::vector<KeyValues> k = {{"blocks", "0 1 2 3 8 32 132 1025"}};
  return k;
}

const std::vector<KeyValues>& reduce_keys() {
  static const std::vector<KeyValues> k = {
      {"vec", "1 2 4 8 16"}, {"items", "1 2 3 4 5"}, {"block", "32 64 128 256 48"},
      {"hints", "0 1 2 3"},   {"ctas_per_sm", "0 1 2 8"},
  };
  return k;
}

struct Drawer {
  std::mt19937_64& g;
  std::vector<std::pair<std::string, int>> picked;
  int in(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(g); }
  template <typename V>
  const typename V::value_type& one(const V& v) {
    return v[size_t(in(0, int(v.size()) - 1))];
  }
  // KEY (with `prefix`) = one of its values, unless the key is taken.
  void add(const std::string& prefix, const KeyValues& kv) {
    const std::string key = prefix + kv.key;
    if (std::any_of(picked.begin(), picked.end(), [&](const auto& p) { return p.first == key; })) return;
    std::vector<int> values;
    std::istringstream text(kv.values);
    for (int v; text >> v;) values.push_back(v);
    picked.emplace_back(key, one(values));
  }
  bool wgmma = false;  // the warp-specialised family was drawn
  // 1-3 keys of a family, its selector first half the time.
  void family(const std::string& prefix, const Family& f) {
    wgmma = wgmma || &f == &gemm_families().front();
    if (in(0, 1)) add(prefix, f.pick);
    for (int n = in(1, 3); n > 0; --n) add(prefix, one(f.keys));
  }
  // 1-3 keys from `keys`.
  void any(const std::string& prefix, const std::vector<KeyValues>& keys) {
    for (int n = in(1, 3); n > 0; --n) add(prefix, one(keys));
  }
  // Grouped GEMM keys: a family three times in four.
  void gemm(const std::string& prefix) {
    if (in(0, 3) > 0) family(prefix, one(gemm_families()));
    else any(prefix, gemm_keys());
  }
  std::string text() const {
    std::string s;
    for (const auto& [key, value] : picked) s += fmt::format("{}{}={}", s.empty() ? "" : ";", key, value);
    return s;
  }
};

// One draw for `op` as ",config=k=N;k=N" to append to its shape. fused_moe:
// grouped GEMM keys for both projections or prefixed for one (gate_up_,
// down_, router_), the decode split's family, or the layer's own keys.
// moe_grouped_gemm's layout pads groups to the shape's block_m (by default
// the mma.sync kernel's tile height), so a draw of the warp-specialised
// family also asks for 64- or 128-row groups where the shape names none.
std::string draw_config(const std::string& op, const std::string& shape, std::mt19937_64& g) {
  Drawer d{g, {}};
  if (op == "moe_grouped_gemm") {
    d.gemm("");
    if (d.wgmma && shape.find("block_m=") == std::string::npos) {
      const int block_m = 64 * d.in(1, 2);
      return fmt::format(",block_m={},config={}", block_m, d.text());
    }
  } else if (op == "fused_moe") {
    switch (d.in(0, 5)) {
      case 0:
        d.gemm("gate_up_");
        break;
      case 1:
        d.gemm("down_");
        break;
      case 2:
        d.gemm("router_");
        break;
      case 3:
        d.gemm("");
        break;
      case 4:
        d.family("", decode_split_family());
        break;
      default:
        d.any("", layer_keys());
    }
    if (d.in(0, 3) == 0) d.add("", d.one(layer_keys()));
  } else {
    d.any("", op == "moe_fused_mapping" ? mapping_keys() : reduce_keys());
  }
  return ",config=" + d.text();
}
}  // namespace

bool has_random_configs(const std::string& op) {
  return op == "fused_moe" || op == "moe_grouped_gemm" || op == "moe_fused_mapping" || op == "moe_reduce_fused";
}

std::vector<std::string> with_random_configs(const std::string& op, std::vector<std::string> shapes, uint64_t seed) {
  if (!has_random_configs(op))
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("--random-config: expected --op fused_moe, moe_grouped_gemm, moe_fused_mapping or "
                            "moe_reduce_fused (the ops with config keys), got '{}'",
                            op));
  std::mt19937_64 g(seed ^ 0x6a09e667f3bcc909ull);
  for (std::string& s : shapes) s += draw_config(op, s, g);
  return shapes;
}
}  // namespace tilecraft::harness
