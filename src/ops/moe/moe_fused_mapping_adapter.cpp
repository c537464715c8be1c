// Harness face of moe_fused_mapping: routing generators (uniform, skewed,
// one hot expert, empty experts, dropped slots) and an independent structural
// check of the layout.
#include <algorithm>
#include <numeric>

#include "tilecraft/error.h"
#include "tilecraft/harness/op_adapter.h"
#include "tilecraft/harness/random.h"
#include "tilecraft/ops/moe_fused_mapping.h"
#include "ops/moe/routing_gen.h"

namespace tilecraft::harness {
namespace {

constexpr const char* kOp = "moe_fused_mapping";
constexpr const char* kOutputs[] = {"tokens_per_expert", "expert_offsets", "token_topk_to_pos",
                                    "pos_to_token",      "tile_expert",    "num_tiles"};

ops::MoeFusedMappingArgs args_of(const Tensors& in, const Tensors& out) {
  return {in.at("ids"),          out.at("tokens_per_expert"), out.at("expert_offsets"), out.at("token_topk_to_pos"),
          out.at("pos_to_token"), out.at("tile_expert"),      out.at("num_tiles")};
}

// --config blocks=N: the mapping's blocks (0 = choose, 1 = one block).
ops::MoeFusedMappingParams params_from(const CaseData& d, const RunOptions* o = nullptr) {
  ops::MoeFusedMappingParams p{int(d.symbols.at("E")), int(d.symbols.at("block_m"))};
  if (o)
    for (auto& [k, v] : o->config) {
      if (k == "blocks") p.blocks = v;
      else throw_arg_error(ErrorKind::kInvalidArgument, kOp, o->config_arg, "key blocks", "'" + k + "'");
    }
  return p;
}

class MoeFusedMappingAdapter final : public OpAdapter {
 public:
  std::string name() const override { return kOp; }

  CaseData generate(const Case& c) const override {
    const WorkloadSpec& w = *c.workload;
    const int64_t T = w.symbols.at("T"), K = w.symbols.at("K"), E = w.symbols.at("E"), bm = w.symbols.at("block_m");
    CaseData d;
    HostTensor ids(DType::kI32, {T, K});
    fill_routing_ids(kOp, w, c.seed, ids.ptr<int32_t>(), T, K, E);
    d.inputs["ids"] = ids;
    const int64_t rows = ops::moe_fused_mapping_rows(T, K, E, std::max<int64_t>(bm, 1));
    d.outputs = {{"tokens_per_expert", DType::kI32, {E}},   {"expert_offsets", DType::kI32, {E + 1}},
                 {"token_topk_to_pos", DType::kI32, {T, K}}, {"pos_to_token", DType::kI32, {rows}},
                 {"tile_expert", DType::kI32, {rows / std::max<int64_t>(bm, 1)}}, {"num_tiles", DType::kI32, {1}}};
    d.symbols = {{"T", double(T)}, {"K", double(K)}, {"E", double(E)}, {"block_m", double(bm)}, {"rows", double(rows)}};
    return d;
  }

  void golden(const CaseData& d, const Tensors& out) const override {
    Tensors in{{"ids", d.inputs.at("ids").view()}};
    ops::moe_fused_mapping_cpu(args_of(in, out), params_from(d));
  }

  void run(const CaseData& d, const Tensors& in, const Tensors& out, DeviceType backend, CUstream stream,
           const RunOptions& o) const override {
    if (backend == DeviceType::kCUDA) ops::moe_fused_mapping(args_of(in, out), params_from(d, &o), stream, o.compile);
    else ops::moe_fused_mapping_cpu(args_of(in, out), params_from(d, &o));
  }

  // Structural invariants, checked without the golden: counts, offsets padded
  // and increasing, every kept slot in its expert's segment exactly once and
  // in token order, padding rows -1, tiles owned by the right expert.
  F64Check check_f64(const CaseData& d, const Tensors& out) const override {
    const auto p = params_from(d);
    const HostTensor& ids = d.inputs.at("ids");
    const int64_t T = ids.shape()[0], K = ids.shape()[1], E = p.num_experts, bm = p.block_m;
    const int32_t* id = ids.ptr<int32_t>();
    const int32_t* cnt = out.at("tokens_per_expert").ptr<int32_t>();
    const int32_t* off = out.at("expert_offsets").ptr<int32_t>();
    const int32_t* pos = out.at("token_topk_to_pos").ptr<int32_t>();
    const int32_t* p2t = out.at("pos_to_token").ptr<int32_t>();
    const int32_t* tile = out.at("tile_expert").ptr<int32_t>();
    const int64_t rows = out.at("pos_to_token").shape[0];
    F64Check c;
    auto fail = [&](int64_t where) {
      if (c.first_failed < 0) c.first_failed = where;
      ++c.num_failed;
    };
    std::vector<int64_t> seen(size_t(E), 0);
    std::vector<int32_t> last_token(size_t(E), -1);
    std::vector<bool> used(size_t(rows), false);
    if (off[0] != 0) fail(0);
    for (int64_t e = 0; e < E; ++e)
      if (off[e + 1] - off[e] != (cnt[e] + bm - 1) / bm * bm || off[e] % bm) fail(e);
    for (int64_t i = 0; i < T * K; ++i) {
      const int32_t e = id[i];
      if (e < 0 || e >= E) {
        if (pos[i] != -1) fail(i);
        continue;
      }
      const int32_t r = pos[i];
      if (r < off[e] || r >= off[e] + cnt[e] || used[size_t(r)] || p2t[r] != int32_t(i / K) ||
          int32_t(i / K) < last_token[size_t(e)] || r != off[e] + seen[size_t(e)])
        fail(i);
      else
        used[size_t(r)] = true;
      last_token[size_t(e)] = int32_t(i / K);
      ++seen[size_t(e)];
    }
    for (int64_t e = 0; e < E; ++e)
      if (seen[size_t(e)] != cnt[e]) fail(e);
    for (int64_t r = 0; r < rows; ++r)
      if (!used[size_t(r)] && p2t[r] != -1) fail(r);
    if (*out.at("num_tiles").ptr<int32_t>() != off[E] / bm) fail(0);
    for (int64_t t = 0; t < rows / bm; ++t) {
      const int32_t owner = tile[t];
      const bool in_range = t * bm < off[E];
      if (!in_range ? owner != -1 : (owner < 0 || owner >= E || off[owner] > t * bm || t * bm >= off[owner + 1]))
        fail(t);
    }
    return c;
  }

  std::vector<jit::KernelSpec> kernels(const Case&, const RunOptions&) const override {
    auto specs = ops::moe_fused_mapping_block_kernel_specs();
    specs.push_back(ops::moe_fused_mapping_kernel_spec());
    return specs;
  }
};

}  // namespace

std::unique_ptr<OpAdapter> make_moe_fused_mapping_adapter() { return std::make_unique<MoeFusedMappingAdapter>(); }

}  // namespace tilecraft::harness
