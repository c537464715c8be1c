// Harness face of moe_grouped_gemm: routing -> mapping golden -> a tile
// schedule, activations and weights generated on the device (model-sized
// weight sets never touch the host), a golden over all rows of small cases
// and over a sample of rows (every expert's first and last row, then evenly
// spaced rows) of large ones, a comparison restricted to the rows the golden
// computed, plus a relative-RMS bound, and a float64 check of the same rows.
#include <algorithm>
#include <cmath>

#include "ops/moe/grouped_gemm_case.h"
#include "ops/moe/routing_gen.h"
#include "tilecraft/error.h"
#include "tilecraft/harness/op_adapter.h"
#include "tilecraft/harness/random.h"
#include "tilecraft/ops/moe_fused_mapping.h"
#include "tilecraft/ops/moe_grouped_gemm.h"
#include "tilecraft/parallel.h"
#include "tilecraft/reference/moe_grouped_gemm.h"

namespace tilecraft::harness {
namespace {

constexpr const char* kOp = "moe_grouped_gemm";
enum Stream : uint64_t { kA = 11, kW = 12, kWUp = 13, kScale = 14 };
// Golden work above this many multiply-adds is sampled by rows.
constexpr double kFullGoldenMacs = 4e9;
constexpr int64_t kSampleRows = 96;

int64_t sym(const WorkloadSpec& w, const char* s) { return w.symbols.at(s); }

bool gated(const VariantSpec& v) { return v.name == "SiluUp"; }
bool scaled(const VariantSpec& v) { return v.name == "RowScaleF32"; }

// True for the second of a two-valued workload parameter, false for the
// first; anything else is an error naming the workload and the values.
bool second_choice(const WorkloadSpec& w, const char* key, const char* first, const char* second) {
  const std::string& v = w.params.at(key);
  if (v != first && v != second)
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{}: workload '{}': {} '{}' is not {} or {}", kOp, w.name, key, v, first, second));
  return v == second;
}

// layout: nk ([E, N, K], nn.Linear) or kn ([E, K, N], the race's).
ops::WeightLayout layout_of(const WorkloadSpec& w) {
  return second_choice(w, "layout", "nk", "kn") ? ops::WeightLayout::kKN : ops::WeightLayout::kNK;
}

// weights: stacked (one tensor) or per_expert (one pointer per expert).
bool per_expert(const WorkloadSpec& w) { return second_choice(w, "weights", "stacked", "per_expert"); }

// a_rows: gathered (A = the tokens [T, K], read through a_index, as the gate/up
// projection does) or contiguous (A = [rows, K] in layout order, no a_index:
// the layer's down projection reading the intermediate).
bool contiguous_a(const WorkloadSpec& w) { return second_choice(w, "a_rows", "gathered", "contiguous"); }

// values: unit (pre-activations A.W of standard deviation ~0.58: uniform A in
// [-1, 1], weights in +-sqrt(3 / K)) or wide (~32, what unit-normal A and W
// give at K = 1024, as some users' test data do: silu's gate values then
// reach far below zero, where an epilogue may leave its fast path; the
// fp16 products silu(g) * u stay below ~3e4).
float preactivation_std(const WorkloadSpec& w) { return second_choice(w, "values", "unit", "wide") ? 32.0f : 0.57735f; }

// padding: read (A's padding rows are read as they are) or skipped (the case
// passes row_token = the layout's pos_to_token, so they read zeros: the
// layer's decode down projection). Skipped needs contiguous A rows.
bool padding_skipped(const WorkloadSpec& w) {
  const bool skipped = second_choice(w, "padding", "read", "skipped");
  if (skipped && !contiguous_a(w))
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("{}: workload '{}': padding 'skipped' needs a_rows 'contiguous'", kOp, w.name));
  return skipped;
}

class MoeGroupedGemmAdapter final : public OpAdapter {
 public:
  std::string name() const override { return kOp; }

  CaseData generate(const Case& c) const override {
    const WorkloadSpec& w = *c.workload;
    const VariantSpec& v = *c.variant;
    const DType dt = *parse_dtype(w.dtype);
    const int64_t T = sym(w, "T"), topk = sym(w, "topk"), E = sym(w, "E"), N = sym(w, "N"), K = sym(w, "K");
    CaseData d;
    d.seed = c.seed;
    // Routing and its layout (the mapping golden), as the layer would make
    // them, but with the tile height of the mma.sync rule (32-row tiles from
    // 9 to 24 rows per expert, which the smoke cases keep covering); the layer
    // on sm_90 takes the wgmma rule (moe_grouped_gemm_block_m(rows, true)).
    const int64_t bm = sym(w, "block_m") ? sym(w, "block_m")
                                          : ops::moe_grouped_gemm_block_m(double(T * topk) / double(std::max<int64_t>(E, 1)));
    HostTensor ids(DType::kI32, {T, topk});
    fill_routing_ids(kOp, w, c.seed, ids.ptr<int32_t>(), T, topk, E);
    const MappingLayout m = map_routing(ids, E, bm);
    const bool contiguous = contiguous_a(w);
    if (!contiguous) d.inputs["a_index"] = m.pos_to_token;
    if (padding_skipped(w)) d.inputs["row_token"] = m.pos_to_token;
    d.inputs["tile_expert"] = m.tile_expert;
    d.inputs["num_tiles"] = m.num_tiles;
    const int64_t rows = m.pos_to_token.shape()[0];
    // Uniform A in [-1, 1] (variance 1/3) and weights in +-ws (variance
    // ws^2 / 3): A.W has variance K ws^2 / 9, so ws = 3 std / sqrt(K).
    const float ws = 3.0f * preactivation_std(w) / std::sqrt(float(std::max<int64_t>(K, 1)));
    const bool kn = layout_of(w) == ops::WeightLayout::kKN;
    const Shape wshape = kn ? Shape{E, K, N} : Shape{E, N, K};
    d.generated["a"] = {dt, {contiguous ? rows : T, K}, kA, -1.f, 1.f};
    d.generated["w"] = {dt, wshape, kW, -ws, ws};
    if (gated(v)) d.generated["w_up"] = {dt, wshape, kWUp, -ws, ws};
    if (scaled(v)) {
      HostTensor s(DType::kF32, {rows});
      fill_uniform(s.view(), c.seed, kScale, 0.5f, 2.0f);
      d.inputs["row_scale"] = s;
    }
    const DType out = scaled(v) ? DType::kF32 : dt;
    d.outputs = {{"out", out, {rows, N}}};
    int64_t used = 0;
    for (int64_t e = 0; e < E; ++e) used += m.counts[size_t(e)];
    d.symbols = {{"T", double(T)},       {"topk", double(topk)},  {"E", double(E)},
                 {"N", double(N)},       {"K", double(K)},        {"block_m", double(bm)},
                 {"rows", double(rows)}, {"used_rows", double(used)}, {"touched", double(m.touched)},
                 {"elem_bytes", double(dtype_size(dt))}, {"out_bytes", double(dtype_size(out))},
                 {"layout_kn", kn ? 1.0 : 0.0}, {"per_expert", per_expert(w) ? 1.0 : 0.0}};
    return d;
  }

  void golden(const CaseData& d, const Tensors& out) const override {
    auto r = ref_of(d, out.at("out"));
    const auto mask = golden_rows(r, kFullGoldenMacs, kSampleRows);
    r.row_mask = mask.data();
    reference::moe_grouped_gemm(r);
  }

  void run(const CaseData& d, const Tensors& in, const Tensors& out, DeviceType backend, CUstream stream,
           const RunOptions& o) const override {
    const auto a = args_of(d, in, out);
    if (backend == DeviceType::kCUDA) ops::moe_grouped_gemm(a, stream, op_options(o));
    else ops::moe_grouped_gemm_cpu(a);
  }

  bool compare(const CaseData& d, const OpSpec& op, const Tensors& want, const Tensors& got,
               nlohmann::json& r) const override {
    auto ref = ref_of(d, want.at("out"));
    const auto mask = golden_rows(ref, kFullGoldenMacs, kSampleRows);
    return compare_rows(op.tolerance, mask, want.at("out"), got.at("out"), r);
  }

  F64Check check_f64(const CaseData& d, const Tensors& out) const override {
    auto r = ref_of(d, out.at("out"));
    const auto mask = golden_rows(r, kFullGoldenMacs, kSampleRows);
    return check_rows_f64(r, mask, out.at("out"));
  }

  std::vector<jit::KernelSpec> kernels(const Case& c, const RunOptions& o) const override {
    CaseData d = shape_only(c);
    if (d.outputs[0].shape[0] == 0) return {};
    Device dev{DeviceType::kCUDA, 0};
    void* fake = reinterpret_cast<void*>(uintptr_t(1) << 20);
    Tensors in, out;
    for (auto& [n, g] : d.generated) in[n] = TensorView(fake, g.dtype, g.shape, dev);
    for (auto& [n, t] : d.inputs) in[n] = TensorView(fake, t.dtype(), t.shape(), dev);
    out["out"] = TensorView(fake, d.outputs[0].dtype, d.outputs[0].shape, dev);
    const auto a = args_of(d, in, out);
    ops::validate_moe_grouped_gemm(a, DeviceType::kCUDA);
    const auto cfg = ops::moe_grouped_gemm_config(a, op_options(o).config, ops::listing_cc_major(o.cc_major, 0),
                                                  ops::sm_count_if_gpu(0));
    return ops::moe_grouped_gemm_kernel_specs(a, cfg);
  }

 private:
  // The case's shapes without its data (for `compile`: no routing needed).
  static CaseData shape_only(const Case& c) {
    const WorkloadSpec& w = *c.workload;
    const DType dt = *parse_dtype(w.dtype);
    const int64_t T = sym(w, "T"), topk = sym(w, "topk"), E = sym(w, "E"), N = sym(w, "N"), K = sym(w, "K");
    const int64_t bm = sym(w, "block_m") ? sym(w, "block_m")
                                          : ops::moe_grouped_gemm_block_m(double(T * topk) / double(std::max<int64_t>(E, 1)));
    const int64_t rows = ops::moe_fused_mapping_rows(T, topk, E, bm);
    const bool kn = layout_of(w) == ops::WeightLayout::kKN, contiguous = contiguous_a(w);
    CaseData d;
    if (!contiguous) d.inputs["a_index"] = HostTensor(DType::kI32, {rows});
    if (padding_skipped(w)) d.inputs["row_token"] = HostTensor(DType::kI32, {rows});
    d.inputs["tile_expert"] = HostTensor(DType::kI32, {rows / bm});
    d.inputs["num_tiles"] = HostTensor(DType::kI32, {1});
    d.generated["a"] = {dt, {contiguous ? rows : T, K}, kA, 0, 0};
    d.generated["w"] = {dt, kn ? Shape{E, K, N} : Shape{E, N, K}, kW, 0, 0};
    if (gated(*c.variant)) d.generated["w_up"] = d.generated["w"];
    if (scaled(*c.variant)) d.inputs["row_scale"] = HostTensor(DType::kF32, {rows});
    d.outputs = {{"out", scaled(*c.variant) ? DType::kF32 : dt, {rows, N}}};
    d.symbols = {{"layout_kn", kn ? 1.0 : 0.0}, {"per_expert", per_expert(w) ? 1.0 : 0.0},
                 {"T", double(T)}, {"topk", double(topk)}};
    return d;
  }

  static ops::MoeGroupedGemmOptions op_options(const RunOptions& o) {
    ops::MoeGroupedGemmOptions m;
    m.compile = o.compile;
    for (auto& [k, v] : o.config) ops::set_config_key(m.config, k, v, kOp, o.config_arg.c_str());
    return m;
  }

  static ops::MoeGroupedGemmArgs args_of(const CaseData& d, const Tensors& in, const Tensors& out) {
    const bool kn = is_kn(d);
    const bool split = is_per_expert(d);
    const auto layout = kn ? ops::WeightLayout::kKN : ops::WeightLayout::kNK;
    ops::MoeGroupedGemmArgs a;
    a.a = in.at("a");
    if (auto it = in.find("a_index"); it != in.end()) a.a_index = it->second;
    a.tile_expert = in.at("tile_expert");
    a.num_tiles = in.at("num_tiles");
    a.w = expert_weights_of(in.at("w"), layout, split);
    if (auto it = in.find("w_up"); it != in.end()) a.w_up = expert_weights_of(it->second, layout, split);
    if (auto it = in.find("row_scale"); it != in.end()) a.row_scale = it->second;
    if (auto it = in.find("row_token"); it != in.end()) a.row_token = it->second;
    a.out = out.at("out");
    // The routed slots, as the layer passes them (T * top_k): the same kernel
    // choices as inside the layer, in runs and in kernel listings alike.
    if (d.symbols.count("T") && d.symbols.count("topk"))
      a.rows_used = int64_t(d.symbols.at("T")) * int64_t(d.symbols.at("topk"));
    return a;
  }
  static bool is_kn(const CaseData& d) { return d.symbols.count("layout_kn") && d.symbols.at("layout_kn") != 0; }
  static bool is_per_expert(const CaseData& d) {
    return d.symbols.count("per_expert") && d.symbols.at("per_expert") != 0;
  }

  static reference::MoeGroupedGemmRef ref_of(const CaseData& d, const TensorView& out) {
    const GeneratedInput& ga = d.generated.at("a");
    const int64_t K = ga.shape[1], N = out.shape[1], M = out.shape[0];
    const bool kn = is_kn(d);
    reference::MoeGroupedGemmRef r{};
    const uint64_t seed = d.seed;
    r.load_a = [ga, seed, K](int64_t src, float* row) { generated_values(ga, seed, src * K, K, row); };
    const GeneratedInput gw = d.generated.at("w");
    const GeneratedInput gu = d.generated.count("w_up") ? d.generated.at("w_up") : gw;
    r.load_w = [gw, gu, seed, N, K, kn](int64_t e, int which, float* nk) {
      load_generated_expert(which ? gu : gw, seed, e, N, K, kn, nk);
    };
    r.gated = d.generated.count("w_up") > 0;
    const HostTensor& tiles = d.inputs.at("tile_expert");
    r.a_index = d.inputs.count("a_index") ? d.inputs.at("a_index").ptr<int32_t>() : nullptr;
    r.row_token = d.inputs.count("row_token") ? d.inputs.at("row_token").ptr<int32_t>() : nullptr;
    r.tile_expert = tiles.ptr<int32_t>();
    r.num_tiles = d.inputs.at("num_tiles").ptr<int32_t>();
    r.row_scale = d.inputs.count("row_scale") ? d.inputs.at("row_scale").ptr<float>() : nullptr;
    r.out = out.data, r.out_dtype = out.dtype;
    r.M = M, r.N = N, r.K = K, r.E = gw.shape[0], r.a_rows = ga.shape[0];
    r.block_m = tiles.shape()[0] ? M / tiles.shape()[0] : 1;
    return r;
  }
};

}  // namespace

std::unique_ptr<OpAdapter> make_moe_grouped_gemm_adapter() { return std::make_unique<MoeGroupedGemmAdapter>(); }

}  // namespace tilecraft::harness
