// Harness face of fused_moe: inputs made on the device with the race's scales
// (x ~ 1, router 1/sqrt(H), gate/up 1/sqrt(I), down 1/sqrt(H); uniform with
// those standard deviations), weights stacked [E, N, K] or per expert in the
// race's [K, N] layout; routing by the router (the layer) or given (uniform,
// skewed, empty experts: the experts part, as vLLM's benchmark times it).
// The golden runs the reference layer per token over all tokens of small
// cases and over sampled tokens of model-sized ones (weights of the experts
// they touch regenerated on the host). Tokens whose routing is a near-tie
// (selection scores within kTieTol) may legitimately route differently; they
// are counted and left out of the comparison.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "ops/moe/grouped_gemm_case.h"
#include "ops/moe/moe_grouped_gemm_common.h"
#include "ops/moe/routing_gen.h"
#include "tilecraft/error.h"
#include "tilecraft/harness/ceilings.h"
#include "tilecraft/harness/op_adapter.h"
#include "tilecraft/harness/random.h"
#include "tilecraft/ops/fused_moe.h"
#include "tilecraft/parallel.h"
#include "tilecraft/reference/fused_moe.h"
#include "tilecraft/reference/moe_topk_gate.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::harness {
namespace {

constexpr const char* kOp = "fused_moe";
enum Stream : uint64_t { kX = 21, kRouter, kGate, kUp, kDown, kBias, kRouteW };
constexpr double kFullGoldenMacs = 4e9;  // above: sampled tokens
constexpr int64_t kSampleTokens = 64;
constexpr int64_t kSampleExperts = 32;   // each costs 3*H*I generated weights on the host
constexpr double kTieTol = 1e-4;         // relative: router logits differ by summation order

int64_t sym(const CaseData& d, const char* s) { return int64_t(d.symbols.at(s)); }

ops::FusedMoeParams params_of(const CaseData& d) {
  ops::FusedMoeParams p;
  p.top_k = int(sym(d, "K"));
  p.gate.mode = sym(d, "sigmoid") ? ops::GateMode::kSigmoidGroupedTopk : ops::GateMode::kSoftmaxTopk;
  p.gate.renormalize = sym(d, "renormalize") != 0;
  p.gate.n_group = int(sym(d, "n_group"));
  p.gate.topk_group = int(sym(d, "topk_group"));
  p.gate.scale = float(d.symbols.at("scale"));
  const int64_t r = sym(d, "round_scores");
  p.gate.score_dtype = r == 1 ? DType::kF16 : r == 2 ? DType::kBF16 : DType::kF32;
  p.given_routing = sym(d, "routing_given") != 0;
  return p;
}

// How far apart two selection scores may be and still count as a tie: summation
// order moves fp32 logits by ~1e-4 relative; with rounded scores (router in the
// activation dtype) that can flip a rounding, i.e. two units in the last place.
double tie_tol(const CaseData& d, double s) {
  const double ulp = ops::score_ulp(params_of(d).gate.score_dtype);
  return kTieTol * std::max(1.0, std::fabs(s)) + 2 * ulp * std::fabs(s);
}

ops::ExpertWeights expert_set(const TensorView& t, bool per_expert) {
  return expert_weights_of(t, per_expert ? ops::WeightLayout::kKN : ops::WeightLayout::kNK, per_expert);
}

ops::FusedMoeArgs args_of(const CaseData& d, const Tensors& in, const Tensors& out) {
  const bool split = sym(d, "per_expert") != 0;
  ops::FusedMoeArgs a;
  a.x = in.at("x");
  a.w_router = in.at("w_router");
  if (sym(d, "fused_gate_up")) {  // weights: fused, one w13 [E, 2I, H] taken as two views
    const auto [gate, up] = ops::gate_up_views(in.at("w_gate_up"));
    a.w_gate.stacked = gate;
    a.w_up.stacked = up;
  } else {
    a.w_gate = expert_set(in.at("w_gate"), split);
    a.w_up = expert_set(in.at("w_up"), split);
  }
  a.w_down = expert_set(in.at("w_down"), split);
  if (auto it = in.find("bias"); it != in.end()) a.bias = it->second;
  a.out = out.at("out");
  const Tensors& routing = sym(d, "routing_given") ? in : out;
  a.ids = routing.at("ids");
  a.weights = routing.at("weights");
  return a;
}

// The tokens a golden covers and their reference routing.
struct Plan {
  std::vector<int64_t> tokens;
  std::vector<int32_t> ids;  // [tokens, K]
  std::vector<float> w;      // [tokens, K]
  std::vector<float> router; // [E, H] (router mode)
};

struct Layer {
  int64_t T, H, I, E, K;
  bool kn, router;
  DType act;
};

Layer layer_of(const CaseData& d) {
  return {sym(d, "T"), sym(d, "H"), sym(d, "I"), sym(d, "E"), sym(d, "K"), sym(d, "per_expert") != 0,
          sym(d, "routing_given") == 0, d.generated.at("x").dtype};
}

reference::MoeTopkGateRef gate_ref(const CaseData& d, const float* logits, const float* bias, int32_t* ids, float* w) {
  const auto p = params_of(d);
  return {logits, bias, ids, w, 1, sym(d, "E"), sym(d, "K"), p.gate.mode == ops::GateMode::kSigmoidGroupedTopk,
          p.gate.renormalize, p.gate.n_group, p.gate.topk_group, p.gate.scale,
          ops::score_rounding(p.gate.score_dtype)};
}

void token_x(const CaseData& d, int64_t t, float* x) {
  const auto& g = d.generated.at("x");
  generated_values(g, d.seed, t * g.shape[1], g.shape[1], x);
}

// Reference routing of token t: ids/weights given, or router row + gate golden.
void route(const CaseData& d, const Layer& L, const Plan& p, int64_t t, float* logits, int32_t* ids, float* w) {
  if (!L.router) {
    std::copy_n(d.inputs.at("ids").ptr<int32_t>() + t * L.K, L.K, ids);
    std::copy_n(d.inputs.at("weights").ptr<float>() + t * L.K, L.K, w);
    return;
  }
  std::vector<float> x(static_cast<size_t>(L.H));
  token_x(d, t, x.data());
  reference::fused_moe_router_row(x.data(), p.router.data(), L.E, L.H, logits);
  const float* bias = d.inputs.count("bias") ? d.inputs.at("bias").ptr<float>() : nullptr;
  reference::moe_topk_gate_rows(gate_ref(d, logits, bias, ids, w), 0, 1);
}

Plan plan_of(const CaseData& d) {
  const Layer L = layer_of(d);
  Plan p;
  if (L.router) {
    p.router.resize(size_t(L.E * L.H));
    generated_values(d.generated.at("w_router"), d.seed, 0, L.E * L.H, p.router.data());
  }
  const bool full = double(L.T) * double(L.K) * 3 * double(L.H) * double(L.I) <= kFullGoldenMacs;
  std::vector<float> logits(static_cast<size_t>(L.E));
  std::vector<int32_t> ids(static_cast<size_t>(L.K));
  std::vector<float> w(static_cast<size_t>(L.K));
  std::set<int32_t> experts;
  const int64_t n = full ? L.T : std::min(L.T, kSampleTokens);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = full ? i : (i * L.T) / n + (L.T / n) / 2;  // spread over the tokens
    route(d, L, p, t, logits.data(), ids.data(), w.data());
    if (!full) {
      std::set<int32_t> more = experts;
      for (int32_t e : ids)
        if (e >= 0 && e < L.E) more.insert(e);
      if (int64_t(more.size()) > kSampleExperts && !p.tokens.empty()) continue;
      experts = more;
    }
    p.tokens.push_back(t);
    p.ids.insert(p.ids.end(), ids.begin(), ids.end());
    p.w.insert(p.w.end(), w.begin(), w.end());
  }
  return p;
}

// fp32 [N, K] matrices of the experts a plan touches.
struct ExpertCache {
  std::map<int32_t, std::vector<float>> gate, up, down;
  ExpertCache(const CaseData& d, const Layer& L, const std::vector<int32_t>& ids) {
    for (int32_t e : std::set<int32_t>(ids.begin(), ids.end())) {
      if (e < 0 || e >= L.E) continue;
      auto load = [&](const char* name, int64_t N, int64_t K) {
        std::vector<float> m(size_t(N * K));
        load_generated_expert(d.generated.at(name), d.seed, e, N, K, L.kn, m.data());
        return m;
      };
      if (d.generated.count("w_gate_up")) {  // [2I, H] per expert: gate rows, then up rows
        std::vector<float> both = load("w_gate_up", 2 * L.I, L.H);
        const auto half = both.begin() + L.I * L.H;
        gate[e].assign(both.begin(), half);
        up[e].assign(half, both.end());
      } else {
        gate[e] = load("w_gate", L.I, L.H);
        up[e] = load("w_up", L.I, L.H);
      }
      down[e] = load("w_down", L.H, L.I);
    }
  }
};

void store_act(const TensorView& out, int64_t i, float v) {
  static_cast<uint16_t*>(out.data)[i] = out.dtype == DType::kBF16 ? conv::f32_to_bf16(v) : conv::f32_to_f16(v);
}

std::vector<uint8_t> token_mask(const Plan& p, int64_t T) {
  std::vector<uint8_t> m(size_t(T), 0);
  for (int64_t t : p.tokens) m[size_t(t)] = 1;
  return m;
}

// The layer object's workspace, reused across calls and scopes (never freed:
// it lives as long as the process and its CUDA context).
ops::FusedMoeWorkspace* workspace() {
  static auto* ws = new ops::FusedMoeWorkspace;
  return ws;
}

// Stream-ordered copies of device tensors (the race's clone_data), freed by release().
struct Clones {
  std::vector<CUdeviceptr> ptrs;
  TensorView clone(const TensorView& t, CUstream s) {
    CUdeviceptr p = 0;
    TC_DRV(cuMemAllocAsync, &p, std::max<size_t>(t.nbytes(), 1), s);
    TC_DRV(cuMemcpyDtoDAsync, p, reinterpret_cast<CUdeviceptr>(t.data), t.nbytes(), s);
    ptrs.push_back(p);
    TensorView c = t;
    c.data = reinterpret_cast<void*>(p);
    return c;
  }
  void release(CUstream s) {
    for (CUdeviceptr p : ptrs) TC_DRV(cuMemFreeAsync, p, s);
    ptrs.clear();
  }
};

// The race runs under PyTorch's caching allocator, which keeps freed memory
// for reuse; the driver's default pool instead returns it to the system at
// every synchronisation unless its release threshold says otherwise. Timing
// clones against a pool that unmaps and remaps gigabytes per call would
// measure the pool, so the harness keeps the memory, as the race's allocator does.
void keep_pool_memory(int device) {
  static std::once_flag once;
  std::call_once(once, [device] {
    CUdevice dev;
    TC_DRV(cuDeviceGet, &dev, device);
    CUmemoryPool pool;
    TC_DRV(cuDeviceGetDefaultMemPool, &pool, dev);
    cuuint64_t keep = ~cuuint64_t(0);
    TC_DRV(cuMemPoolSetAttribute, pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
  });
}

// Every input of the case cloned; `out` and the routing outputs kept.
Tensors clone_inputs(const Tensors& in, Clones& c, CUstream s) {
  Tensors t;
  for (auto& [n, v] : in) t[n] = c.clone(v, s);
  return t;
}

class FusedMoeAdapter final : public OpAdapter {
 public:
  std::string name() const override { return kOp; }

  CaseData generate(const Case& c) const override {
    const WorkloadSpec& w = *c.workload;
    const DType dt = *parse_dtype(w.dtype);
    auto s = [&](const char* k) { return w.symbols.at(k); };
    const int64_t T = s("T"), H = s("H"), I = s("I"), E = s("E"), K = s("K");
    auto gate_mode = ops::parse_gate_mode(w.params.at("mode"));
    auto bad = [&](const std::string& what) {
      throw Error(ErrorKind::kInvalidArgument, fmt::format("{}: workload '{}': {}", kOp, w.name, what));
    };
    if (!gate_mode) bad("mode '" + w.params.at("mode") + "' is not softmax_topk or sigmoid_grouped_topk");
    const std::string& form = w.params.at("weights");
    if (form != "stacked" && form != "per_expert" && form != "fused")
      bad("weights '" + form + "' is not stacked, per_expert or fused");
    const std::string& scores = w.params.at("router_scores");
    if (scores != "fp32" && scores != "dtype") bad("router_scores '" + scores + "' is not fp32 or dtype");
    const bool kn = form == "per_expert", fused = form == "fused", router = w.params.at("routing") == "router";
    const bool sigmoid = *gate_mode == ops::GateMode::kSigmoidGroupedTopk;
    const float scale = workload_number(kOp, w, "scale");
    const bool renormalize = workload_flag(kOp, w, "renormalize");
    if (router)  // the layer's gate: a shape it cannot select from is refused here, not failed in the golden
      reference::check_moe_topk_gate_shape(fmt::format("{}: workload '{}'", kOp, w.name), E, K, sigmoid,
                                           int(s("n_group")), int(s("topk_group")));
    CaseData d;
    d.seed = c.seed;
    const float r3 = std::sqrt(3.0f);
    auto sd = [&](int64_t n) { return r3 / std::sqrt(float(std::max<int64_t>(n, 1))); };
    d.generated["x"] = {dt, {T, H}, kX, -r3, r3};
    d.generated["w_router"] = {dt, {E, H}, kRouter, -sd(H), sd(H)};
    const Shape gate_shape = kn ? Shape{E, H, I} : Shape{E, I, H}, down_shape = kn ? Shape{E, I, H} : Shape{E, H, I};
    if (fused) {
      d.generated["w_gate_up"] = {dt, {E, 2 * I, H}, kGate, -sd(I), sd(I)};
    } else {
      d.generated["w_gate"] = {dt, gate_shape, kGate, -sd(I), sd(I)};
      d.generated["w_up"] = {dt, gate_shape, kUp, -sd(I), sd(I)};
    }
    d.generated["w_down"] = {dt, down_shape, kDown, -sd(H), sd(H)};
    if (sigmoid && router) {
      HostTensor b(DType::kF32, {E});
      fill_uniform(b.view(), c.seed, kBias, -0.1f, 0.1f);
      d.inputs["bias"] = b;
    }
    d.outputs = {{"out", dt, {T, H}}};
    double touched = double(E) * (1.0 - std::pow(1.0 - double(K) / double(E), double(T)));  // expected, uniform
    if (router) {
      d.outputs.push_back({"ids", DType::kI32, {T, K}});
      d.outputs.push_back({"weights", DType::kF32, {T, K}});
    } else {
      HostTensor ids(DType::kI32, {T, K}), wt(DType::kF32, {T, K});
      fill_routing_ids(kOp, w, c.seed, ids.ptr<int32_t>(), T, K, E, "router");
      fill_uniform(wt.view(), c.seed, kRouteW, 0.1f, 1.0f);
      for (int64_t t = 0; t < T; ++t) {  // renormalised, as the models' gates emit them
        float sum = 0;
        for (int64_t k = 0; k < K; ++k) sum += wt.ptr<float>()[t * K + k];
        for (int64_t k = 0; k < K; ++k) wt.ptr<float>()[t * K + k] /= sum;
      }
      std::vector<bool> hit(size_t(E), false);
      for (int64_t i = 0; i < T * K; ++i)
        if (int32_t e = ids.ptr<int32_t>()[i]; e >= 0 && e < E) hit[size_t(e)] = true;
      touched = double(std::count(hit.begin(), hit.end(), true));
      d.inputs["ids"] = ids;
      d.inputs["weights"] = wt;
    }
    d.symbols = {{"T", double(T)},
                 {"H", double(H)},
                 {"I", double(I)},
                 {"E", double(E)},
                 {"K", double(K)},
                 {"n_group", double(s("n_group"))},
                 {"topk_group", double(s("topk_group"))},
                 {"touched", touched},
                 {"elem_bytes", double(dtype_size(dt))},
                 {"sigmoid", sigmoid ? 1.0 : 0.0},
                 {"renormalize", renormalize ? 1.0 : 0.0},
                 {"scale", double(scale)},
                 {"per_expert", kn ? 1.0 : 0.0},
                 {"fused_gate_up", fused ? 1.0 : 0.0},
                 {"routing_given", router ? 0.0 : 1.0},
                 {"round_scores", double(scores == "dtype" ? ops::score_rounding(dt) : 0)}};
    return d;
  }

  void golden(const CaseData& d, const Tensors& out) const override {
    const Layer L = layer_of(d);
    const Plan p = plan_of(d);
    const ExpertCache cache(d, L, p.ids);
    const int64_t n = int64_t(p.tokens.size());
    parallel_for(n, L.K * 3 * L.H * L.I, [&](int64_t b, int64_t e) {
      std::vector<float> x(size_t(L.H)), y(size_t(L.K * L.H)), o(size_t(L.H));
      std::vector<const float*> rows(size_t(L.K));
      for (int64_t i = b; i < e; ++i) {
        const int64_t t = p.tokens[size_t(i)];
        token_x(d, t, x.data());
        for (int64_t k = 0; k < L.K; ++k) {
          const int32_t ex = p.ids[size_t(i * L.K + k)];
          rows[size_t(k)] = nullptr;
          if (ex < 0 || ex >= L.E) continue;
          reference::fused_moe_expert_row(x.data(), cache.gate.at(ex).data(), cache.up.at(ex).data(),
                                          cache.down.at(ex).data(), L.H, L.I, L.act, y.data() + k * L.H);
          rows[size_t(k)] = y.data() + k * L.H;
        }
        reference::fused_moe_combine_row(rows.data(), p.w.data() + i * L.K, L.K, L.H, L.act, o.data());
        for (int64_t h = 0; h < L.H; ++h) store_act(out.at("out"), t * L.H + h, o[size_t(h)]);
        if (L.router) {
          std::copy_n(p.ids.data() + i * L.K, L.K, out.at("ids").ptr<int32_t>() + t * L.K);
          std::copy_n(p.w.data() + i * L.K, L.K, out.at("weights").ptr<float>() + t * L.K);
        }
      }
    });
  }

  void run(const CaseData& d, const Tensors& in, const Tensors& out, DeviceType backend, CUstream stream,
           const RunOptions& o) const override {
    const auto a = args_of(d, in, out);
    const ops::FusedMoeOptions lo = layer_options(o);  // a bad key is an error on either backend
    if (backend == DeviceType::kCPU) {
      ops::fused_moe_cpu(a, params_of(d));
      return;
    }
    ops::fused_moe(a, params_of(d), stream, workspace(), lo);
  }

  std::string main_scope() const override {
    return "cached_e2e: the whole layer (routing to combine), layer object and workspace reused";
  }

  std::vector<TimedScope> bench_scopes(const CaseData& d, const Tensors& in, const Tensors& out,
                                       const RunOptions& o) const override {
    const Layer L = layer_of(d);
    const auto a = args_of(d, in, out);
    const auto p = params_of(d);
    const auto lo = layer_options(o);
    const double R = double(L.T * L.K), H = double(L.H), I = double(L.I);
    const double expert_flops = 2 * R * 3 * H * I;
    using S = ops::FusedMoeStage;
    auto stages = [=](std::initializer_list<S> list) {
      unsigned m = 0;
      for (S st : list) m |= unsigned(st);
      return [=](CUstream s) {
        auto l = lo;
        l.stages = m;
        ops::fused_moe(a, p, s, workspace(), l);
      };
    };
    std::vector<TimedScope> v;
    if (L.router) v.push_back({"routing", "router GEMM + top-k gate", stages({S::kRouter, S::kGate}), 2 * L.T * H * L.E});
    if (ops::fused_moe_uses_decode_split(a, p, lo)) {
      if (L.router)
        v.push_back({"gate_mapping", "top-k gate, logits given (decode path: no mapping)", stages({S::kGate})});
      v.push_back({"gate_up", "decode split: gate/up, silu*up and down per 128-column slice of I (fp32 partials)",
                   stages({S::kGateUp}), expert_flops});
      v.push_back({"down", "decode split: combine (slices, then slots weighted, in order)", stages({S::kDown})});
    } else if (ops::fused_moe_uses_decode(a, p, lo)) {
      // The decode path: no mapping, and the combine runs inside the down
      // projection, so those two have no stage of their own.
      if (L.router)
        v.push_back({"gate_mapping", "top-k gate, logits given (decode path: no mapping)", stages({S::kGate})});
      v.push_back({"gate_up", "decode path: rows by (token, slot), silu*up", stages({S::kGateUp}), 2 * R * 2 * H * I});
      v.push_back({"down", "decode path: down projection + combine (weighted, k in order)", stages({S::kDown}),
                   2 * R * H * I});
    } else {
      if (L.router)  // the two in one launch (the layer's path); logits from the router stage of earlier calls
        v.push_back(
            {"gate_mapping", "top-k gate + mapping, logits given (routing + mapping)", stages({S::kGate, S::kMapping})});
      v.push_back({"mapping", "expert-major layout and tile schedule", stages({S::kMapping})});
      v.push_back({"gate_up", "grouped GEMM, gathered rows, silu*up", stages({S::kGateUp}), 2 * R * 2 * H * I});
      v.push_back({"down", "grouped GEMM", stages({S::kDown}), 2 * R * H * I});
      v.push_back({"combine", "moe_reduce_fused, weighted, k in order", stages({S::kCombine})});
    }
    // Judged against the per-expert cuBLAS loop (add_baselines): the same
    // GEMM FLOPs, which is what a user without a grouped GEMM would run.
    v.push_back({"kernel_only", "both grouped GEMMs, metadata prepared", stages({S::kGateUp, S::kDown}), expert_flops,
                 "cublas_per_expert"});
    v.push_back({"experts", "routing given: mapping, GEMMs, combine (vLLM fused_moe's scope)",
                 stages({S::kMapping, S::kGateUp, S::kDown, S::kCombine}), expert_flops});
    const Tensors inputs = in;
    keep_pool_memory(a.x.device.index);
    v.push_back({"clone", "stream-ordered copies of x and every weight, freed", [inputs](CUstream s) {
                   Clones c;
                   clone_inputs(inputs, c, s);
                   c.release(s);
                 }});
    const CaseData* dp = &d;
    v.push_back({"official_e2e",
                 "race boundary: clone inputs and weights, new layer object (fresh workspace), forward, synchronize",
                 [inputs, out, p, lo, dp](CUstream s) {
                   Clones c;
                   const Tensors cl = clone_inputs(inputs, c, s);
                   ops::fused_moe(args_of(*dp, cl, out), p, s, nullptr, lo);
                   c.release(s);
                   TC_DRV(cuStreamSynchronize, s);
                 },
                 expert_flops});
    add_baselines(d, L, a, v);
    return v;
  }

  bool compare(const CaseData& d, const OpSpec& op, const Tensors& want, const Tensors& got,
               nlohmann::json& r) const override {
    const Layer L = layer_of(d);
    const Plan p = plan_of(d);
    std::vector<uint8_t> mask = token_mask(p, L.T);
    int64_t ties = 0, misrouted = 0, first_bad = -1;
    if (L.router) {
      std::vector<float> logits(size_t(L.E)), sel(size_t(L.E)), wt(size_t(L.E));
      std::vector<int32_t> ids(size_t(L.K));
      std::vector<float> w(size_t(L.K));
      const float* bias = d.inputs.count("bias") ? d.inputs.at("bias").ptr<float>() : nullptr;
      for (int64_t t : p.tokens) {
        const int32_t* gw = want.at("ids").ptr<int32_t>() + t * L.K;
        const int32_t* gg = got.at("ids").ptr<int32_t>() + t * L.K;
        const std::set<int32_t> sw(gw, gw + L.K), sg(gg, gg + L.K);
        if (sw == sg) continue;
        route(d, L, p, t, logits.data(), ids.data(), w.data());
        reference::moe_topk_gate_scores(gate_ref(d, logits.data(), bias, ids.data(), w.data()), 0, sel.data(),
                                        wt.data());
        bool tie = true;
        for (int32_t a : sg)
          for (int32_t b : sw)
            if (!sw.count(a) && !sg.count(b))
              tie &= a >= 0 && a < L.E &&
                     std::fabs(sel[size_t(a)] - sel[size_t(b)]) <= tie_tol(d, sel[size_t(b)]);
        if (tie) ++ties;
        else {
          ++misrouted;
          if (first_bad < 0) first_bad = t;
        }
        mask[size_t(t)] = 0;
      }
    }
    bool ok = compare_rows(op.tolerance, mask, want.at("out"), got.at("out"), r);
    r["tokens_sampled"] = int64_t(p.tokens.size());
    r["near_tie_tokens"] = ties;
    r["misrouted_tokens"] = misrouted;
    if (first_bad >= 0) r["first_misrouted_token"] = first_bad;
    return ok && misrouted == 0;
  }

  // float64 check of the sampled tokens: the routing the backend chose must be
  // a top-k of the reference scores (up to near-ties) with the right weights;
  // the output must match a float64 evaluation of that routing within a bound
  // for fp32 accumulation and the rounding of the stored intermediates.
  F64Check check_f64(const CaseData& d, const Tensors& out) const override {
    const Layer L = layer_of(d);
    const Plan p = plan_of(d);
    const Tensors& routing = L.router ? out : Tensors{};
    std::vector<int32_t> ids(p.tokens.size() * size_t(L.K));
    std::vector<float> w(ids.size());
    for (size_t i = 0; i < p.tokens.size(); ++i) {
      const int64_t t = p.tokens[i];
      const int32_t* src_ids = L.router ? routing.at("ids").ptr<int32_t>() : d.inputs.at("ids").ptr<int32_t>();
      const float* src_w = L.router ? routing.at("weights").ptr<float>() : d.inputs.at("weights").ptr<float>();
      std::copy_n(src_ids + t * L.K, L.K, ids.begin() + int64_t(i) * L.K);
      std::copy_n(src_w + t * L.K, L.K, w.begin() + int64_t(i) * L.K);
    }
    F64Check c;
    auto fail = [&](int64_t where) {
      if (c.first_failed < 0) c.first_failed = where;
      ++c.num_failed;
    };
    if (L.router) check_routing(d, L, p, ids, w, fail);
    const ExpertCache cache(d, L, ids);
    const double u_act = L.act == DType::kBF16 ? 1.0 / 256 : 1.0 / 2048;  // unit roundoff of the stored intermediates
    const double eps = 1.0 / (1 << 24);
    const int64_t n = int64_t(p.tokens.size());
    std::vector<F64Check> part(static_cast<size_t>(n));
    parallel_for(n, L.K * 3 * L.H * L.I, [&](int64_t b, int64_t end) {
      std::vector<float> x(size_t(L.H));
      std::vector<double> hv(size_t(L.I)), dh(size_t(L.I)), ref(size_t(L.H)), bound(size_t(L.H));
      for (int64_t i = b; i < end; ++i) {
        const int64_t t = p.tokens[size_t(i)];
        F64Check& pc = part[size_t(i)];
        token_x(d, t, x.data());
        std::fill(ref.begin(), ref.end(), 0.0);
        std::fill(bound.begin(), bound.end(), 0.0);
        for (int64_t k = 0; k < L.K; ++k) {
          const int32_t e = ids[size_t(i * L.K + k)];
          if (e < 0 || e >= L.E || !cache.gate.count(e)) continue;
          const double wk = w[size_t(i * L.K + k)];
          const float *wg = cache.gate.at(e).data(), *wu = cache.up.at(e).data(), *wd = cache.down.at(e).data();
          for (int64_t j = 0; j < L.I; ++j) {
            double g = 0, u = 0, ga = 0, ua = 0;
            for (int64_t h = 0; h < L.H; ++h) {
              const double xh = x[size_t(h)];
              g += xh * wg[j * L.H + h];
              u += xh * wu[j * L.H + h];
              ga += std::fabs(xh * wg[j * L.H + h]);
              ua += std::fabs(xh * wu[j * L.H + h]);
            }
            const double sig = 1.0 / (1.0 + std::exp(-g));
            hv[size_t(j)] = g * sig * u;
            dh[size_t(j)] = u_act * std::fabs(hv[size_t(j)]) +
                            double(L.H) * eps * (1.1 * ga * std::fabs(u) + std::fabs(g * sig) * ua) +
                            16 * eps * std::fabs(hv[size_t(j)]) + 0.5 * subnormal_step(L.act);
          }
          for (int64_t h = 0; h < L.H; ++h) {
            double y = 0, ya = 0, yd = 0;
            for (int64_t j = 0; j < L.I; ++j) {
              const double wdj = wd[h * L.I + j];
              y += hv[size_t(j)] * wdj;
              ya += std::fabs(hv[size_t(j)] * wdj);
              yd += dh[size_t(j)] * std::fabs(wdj);
            }
            ref[size_t(h)] += wk * y;
            bound[size_t(h)] += std::fabs(wk) * (yd * (1 + u_act) + double(L.I) * eps * ya + u_act * std::fabs(y));
          }
        }
        for (int64_t h = 0; h < L.H; ++h) {
          const double got = load_as_double(out.at("out").data, L.act, size_t(t * L.H + h));
          const double allowed =
              bound[size_t(h)] + u_act * std::fabs(ref[size_t(h)]) + double(L.K) * eps + subnormal_step(L.act);
          pc.add(std::fabs(got - ref[size_t(h)]), allowed, t * L.H + h);
        }
      }
    });
    for (const F64Check& pc : part) c.merge(pc);
    return c;
  }

  std::vector<jit::KernelSpec> kernels(const Case& c, const RunOptions& o) const override {
    const WorkloadSpec& w = *c.workload;
    const DType dt = *parse_dtype(w.dtype);
    auto s = [&](const char* k) { return w.symbols.at(k); };
    const int64_t T = s("T"), H = s("H"), I = s("I"), E = s("E"), K = s("K");
    const bool kn = w.params.at("weights") == "per_expert", fused = w.params.at("weights") == "fused";
    Device dev{DeviceType::kCUDA, 0};
    void* fake = reinterpret_cast<void*>(uintptr_t(1) << 20);
    Tensors in{{"x", TensorView(fake, dt, {T, H}, dev)},
               {"w_router", TensorView(fake, dt, {E, H}, dev)},
               {"w_gate", TensorView(fake, dt, kn ? Shape{E, H, I} : Shape{E, I, H}, dev)},
               {"w_up", TensorView(fake, dt, kn ? Shape{E, H, I} : Shape{E, I, H}, dev)},
               {"w_gate_up", TensorView(fake, dt, {E, 2 * I, H}, dev)},
               {"w_down", TensorView(fake, dt, kn ? Shape{E, I, H} : Shape{E, H, I}, dev)},
               {"ids", TensorView(fake, DType::kI32, {T, K}, dev)},
               {"weights", TensorView(fake, DType::kF32, {T, K}, dev)}};
    Tensors out{{"out", TensorView(fake, dt, {T, H}, dev)}};
    CaseData d;
    d.symbols = {{"K", double(K)},
                 {"sigmoid", w.params.at("mode") == "sigmoid_grouped_topk" ? 1.0 : 0.0},
                 {"renormalize", 0.0},
                 {"n_group", double(s("n_group"))},
                 {"topk_group", double(s("topk_group"))},
                 {"scale", 1.0},
                 {"per_expert", kn ? 1.0 : 0.0},
                 {"fused_gate_up", fused ? 1.0 : 0.0},
                 {"routing_given", 1.0},
                 {"round_scores", double(w.params.at("router_scores") == "dtype" ? ops::score_rounding(dt) : 0)}};
    auto p = params_of(d);
    p.given_routing = false;
    return ops::fused_moe_kernel_specs(args_of(d, in, out), p, layer_options(o), o.cc_major);
  }

 private:
  static ops::FusedMoeOptions layer_options(const RunOptions& o) {
    // (Each error names the key and what it takes; the keys are in the README.)
    ops::FusedMoeOptions m = ops::fused_moe_options(o.config, o.config_arg.c_str());
    m.compile = o.compile;
    return m;
  }

  // cuBLAS baselines: dense GEMMs of the layer's expert FLOPs, and the
  // per-expert loop a careful user writes without a grouped GEMM (rows per
  // expert read back to the host beforehand, rows already contiguous, no
  // activation): both lower bounds on what they stand for.
  static void add_baselines(const CaseData& d, const Layer& L, const ops::FusedMoeArgs& a,
                            std::vector<TimedScope>& v) {
    const int dev = a.x.device.index;
    const int64_t R = L.T * L.K;
    auto buf = [&](int64_t rows, int64_t cols, uint64_t stream) {
      auto t = std::make_shared<DeviceTensor>(L.act, Shape{std::max<int64_t>(rows, 1), cols}, dev);
      fill_uniform_device(t->view(), d.seed, stream, -1.f, 1.f, nullptr);
      return t;
    };
    auto A = buf(R, L.H, 31), W1 = buf(L.H, 2 * L.I, 32), C1 = buf(R, 2 * L.I, 33), A2 = buf(R, L.I, 34),
         W2 = buf(L.I, L.H, 35), C2 = buf(R, L.H, 36);
    TC_DRV(cuCtxSynchronize);
    const DType dt = L.act;
    const double flops = 2.0 * double(R) * 3 * double(L.H) * double(L.I);
    auto fail = [](const std::string& why) { throw Error(ErrorKind::kCuda, "cuBLAS baseline: " + why); };
    v.push_back({"cublas_dense", "cuBLAS [T*K, H]x[H, 2I] + [T*K, I]x[I, H]: same FLOPs, one group",
                 [=](CUstream s) {
                   std::string why;
                   if (!cublas_gemm_rowmajor(dev, s, false, R, 2 * L.I, L.H, dt, A->data(), W1->data(), C1->data(), why) ||
                       !cublas_gemm_rowmajor(dev, s, false, R, L.H, L.I, dt, A2->data(), W2->data(), C2->data(), why))
                     fail(why);
                 },
                 flops});
    // Rows per expert: the routing this case ran with.
    std::vector<int32_t> ids(static_cast<size_t>(R));
    if (R > 0) TC_DRV(cuMemcpyDtoH, ids.data(), reinterpret_cast<CUdeviceptr>(a.ids->data), size_t(R) * 4);
    std::vector<int64_t> rows(size_t(L.E), 0);
    for (int32_t e : ids)
      if (e >= 0 && e < L.E) ++rows[size_t(e)];
    const bool nk = a.w_gate.layout == ops::WeightLayout::kNK;
    // Each expert's matrices, found once (not inside the timed loop).
    const auto gate = ops::grouped_gemm::bases(a.w_gate), up = ops::grouped_gemm::bases(a.w_up),
               down = ops::grouped_gemm::bases(a.w_down);
    v.push_back({"cublas_per_expert", "3 cuBLAS GEMMs per touched expert on contiguous rows (no gather, no silu)",
                 [=](CUstream s) {
                   std::string why;
                   int64_t off = 0;
                   const size_t es = dtype_size(dt);
                   for (int64_t e = 0; e < L.E; ++e) {
                     const int64_t n = rows[size_t(e)];
                     if (!n) continue;
                     const char* x = static_cast<const char*>(A->data()) + size_t(off * L.H) * es;
                     char* g = static_cast<char*>(C1->data()) + size_t(off * 2 * L.I) * es;
                     const char* h = static_cast<const char*>(A2->data()) + size_t(off * L.I) * es;
                     char* y = static_cast<char*>(C2->data()) + size_t(off * L.H) * es;
                     if (!cublas_gemm_rowmajor(dev, s, nk, n, L.I, L.H, dt, x, gate[size_t(e)], g, why) ||
                         !cublas_gemm_rowmajor(dev, s, nk, n, L.I, L.H, dt, x, up[size_t(e)], g + size_t(n * L.I) * es,
                                               why) ||
                         !cublas_gemm_rowmajor(dev, s, nk, n, L.H, L.I, dt, h, down[size_t(e)], y, why))
                       fail(why);
                     off += n;
                   }
                 },
                 flops});
  }

  template <typename Fail>
  static void check_routing(const CaseData& d, const Layer& L, const Plan& p, const std::vector<int32_t>& ids,
                            const std::vector<float>& w, Fail& fail) {
    std::vector<float> logits(size_t(L.E)), sel(size_t(L.E)), wt(size_t(L.E));
    std::vector<int32_t> tmp_ids(size_t(L.K));
    std::vector<float> tmp_w(size_t(L.K));
    const float* bias = d.inputs.count("bias") ? d.inputs.at("bias").ptr<float>() : nullptr;
    const auto prm = params_of(d);
    for (size_t i = 0; i < p.tokens.size(); ++i) {
      route(d, L, p, p.tokens[i], logits.data(), tmp_ids.data(), tmp_w.data());
      reference::moe_topk_gate_scores(gate_ref(d, logits.data(), bias, tmp_ids.data(), tmp_w.data()), 0, sel.data(),
                                      wt.data());
      const int32_t* chosen = ids.data() + i * size_t(L.K);
      std::set<int32_t> set(chosen, chosen + L.K);
      bool bad = int64_t(set.size()) != L.K;
      float worst = INFINITY, best_left = -INFINITY;
      double denom = 0;
      for (int64_t k = 0; k < L.K && !bad; ++k) {
        bad = chosen[k] < 0 || chosen[k] >= L.E;
        if (!bad) worst = std::min(worst, sel[size_t(chosen[k])]), denom += wt[size_t(chosen[k])];
      }
      for (int64_t e = 0; e < L.E && !bad; ++e)
        if (!set.count(int32_t(e))) best_left = std::max(best_left, sel[size_t(e)]);
      if (!bad && worst < best_left && std::fabs(worst - best_left) > tie_tol(d, best_left))
        bad = true;
      for (int64_t k = 0; k < L.K && !bad; ++k) {
        double want = wt[size_t(chosen[k])] * (prm.gate.renormalize ? 1.0 / denom : 1.0) *
                      (prm.gate.mode == ops::GateMode::kSigmoidGroupedTopk ? prm.gate.scale : 1.0);
        bad = std::fabs(double(w[i * size_t(L.K) + size_t(k)]) - want) > 1e-5 + tie_tol(d, want);
      }
      if (bad) fail(p.tokens[i] * L.K);
    }
  }
};

}  // namespace

std::unique_ptr<OpAdapter> make_fused_moe_adapter() { return std::make_unique<FusedMoeAdapter>(); }

}  // namespace tilecraft::harness
