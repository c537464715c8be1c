#include "tilecraft/harness/op_adapter.h"

#include <fmt/format.h>

#include "tilecraft/error.h"

namespace tilecraft::harness {

std::unique_ptr<OpAdapter> make_moe_reduce_fused_adapter();
std::unique_ptr<OpAdapter> make_moe_topk_gate_adapter();
std::unique_ptr<OpAdapter> make_moe_fused_mapping_adapter();
std::unique_ptr<OpAdapter> make_moe_grouped_gemm_adapter();
std::unique_ptr<OpAdapter> make_fused_moe_adapter();

namespace {
const std::map<std::string, std::unique_ptr<OpAdapter>>& registry() {
  static const auto r = [] {
    std::map<std::string, std::unique_ptr<OpAdapter>> m;
    auto add = [&](std::unique_ptr<OpAdapter> a) { m.emplace(a->name(), std::move(a)); };
    add(make_moe_reduce_fused_adapter());
    add(make_moe_topk_gate_adapter());
    add(make_moe_fused_mapping_adapter());
    add(make_moe_grouped_gemm_adapter());
    add(make_fused_moe_adapter());
    return m;
  }();
  return r;
}
}  // namespace

std::string Case::id() const { return op->name + "/" + variant->name + "/" + workload->name; }

RunOptions with_workload_config(const Case& c, const RunOptions& o) {
  if (c.workload->config.empty()) return o;
  RunOptions r = o;
  r.config_arg = o.config.empty() ? "config (of the workload)" : "--config or the workload's config";
  for (const auto& [key, value] : c.workload->config) {
    const auto [it, added] = r.config.emplace(key, value);
    if (!added && it->second != value)
      throw_arg_error(ErrorKind::kInvalidArgument, c.op->name, "--config",
                      fmt::format("no key that workload '{}' pins to another value (its config has {}={})",
                                  c.workload->name, key, value),
                      fmt::format("{}={}", key, it->second));
  }
  return r;
}

bool has_adapter(const std::string& op) { return registry().count(op) > 0; }

const OpAdapter& adapter_for(const std::string& op) {
  auto it = registry().find(op);
  if (it == registry().end())
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("op '{}' is in the manifest but tilecraft has no implementation of it", op));
  return *it->second;
}

}  // namespace tilecraft::harness
